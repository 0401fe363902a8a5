package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// A full `ralph run` with each real agent CLI against the scripted server.
//
// One script serves both stories: the server picks its reply by counting
// the assistant turns in a request, and every story is a fresh CLI process,
// so both stories play the same three steps:
//
//  0. the CLI's own file-writing tool writes mark.sh, a script that makes
//     the file of the story in $RALPH_ITEM_ID (ralph sets it; the agent's
//     shell tool inherits it);
//  1. the CLI's own shell tool runs `sh mark.sh && rm mark.sh`;
//  2. a final message with "## Learnings" (a unique marker) and the promise.
//
// ralph's gates then check one.txt / two.txt, commit each story, and the
// second story's prompt must carry the first story's learning.

// cliCase is one real agent CLI and the shape of its own tools.
type cliCase struct {
	name string // --agent
	bin  string
	pkg  string // npm package named in the "not installed" message
	// write is the CLI's file-writing tool call creating dir/path.
	write func(dir, path, content string) llmtest.ToolCall
	// shell is the CLI's shell tool call running command in the work tree.
	shell func(command string) llmtest.ToolCall
	// retryCapped: RALPH_AGENT_MAX_RETRIES=0 stops the CLI's own retries,
	// so a 429 reaches ralph. opencode has no such setting: its own retry
	// absorbs a single 429 (honouring Retry-After).
	retryCapped bool
}

func tc(name string, input map[string]any) llmtest.ToolCall {
	b, err := json.Marshal(input)
	if err != nil {
		panic(err)
	}
	return llmtest.ToolCall{Name: name, Input: b}
}

var cliCases = []cliCase{
	{
		name: "claude", bin: "claude", pkg: "@anthropic-ai/claude-code", retryCapped: true,
		write: func(dir, path, content string) llmtest.ToolCall {
			return tc("Write", map[string]any{"file_path": filepath.Join(dir, path), "content": content})
		},
		shell: func(command string) llmtest.ToolCall {
			return tc("Bash", map[string]any{"command": command, "description": "Run the story script"})
		},
	},
	{
		// Codex has no plain write tool for a custom model (apply_patch is
		// a freeform tool): both steps use its shell tool, exec_command.
		name: "codex", bin: "codex", pkg: "@openai/codex", retryCapped: true,
		write: func(dir, path, content string) llmtest.ToolCall {
			return tc("exec_command", map[string]any{"cmd": "cat > " + path + " <<'RALPH_EOF'\n" + content + "RALPH_EOF", "login": false})
		},
		shell: func(command string) llmtest.ToolCall {
			return tc("exec_command", map[string]any{"cmd": command, "login": false})
		},
	},
	{
		name: "opencode", bin: "opencode", pkg: "opencode-ai", retryCapped: false,
		write: func(dir, path, content string) llmtest.ToolCall {
			return tc("write", map[string]any{"filePath": filepath.Join(dir, path), "content": content})
		},
		shell: func(command string) llmtest.ToolCall {
			return tc("bash", map[string]any{"command": command, "description": "Run the story script"})
		},
	},
	{
		name: "gemini", bin: "gemini", pkg: "@google/gemini-cli", retryCapped: true,
		write: func(dir, path, content string) llmtest.ToolCall {
			return tc("write_file", map[string]any{"file_path": filepath.Join(dir, path), "content": content})
		},
		shell: func(command string) llmtest.ToolCall {
			return tc("run_shell_command", map[string]any{"command": command, "description": "Run the story script"})
		},
	},
	{
		// GitHub Copilot CLI in its bring-your-own-key mode (chat
		// completions). It has no retry setting: it retries a 429 itself,
		// honouring Retry-After.
		name: "copilot", bin: "copilot", pkg: "@github/copilot", retryCapped: false,
		write: func(dir, path, content string) llmtest.ToolCall {
			return tc("create", map[string]any{"path": filepath.Join(dir, path), "file_text": content})
		},
		shell: func(command string) llmtest.ToolCall {
			return tc("bash", map[string]any{"command": command, "description": "Run the story script"})
		},
	},
}

// markScript makes the file of the story ralph is working on.
const markScript = `case "$RALPH_ITEM_ID" in
US-001) echo one > one.txt ;;
US-002) echo two > two.txt ;;
*) echo "mark.sh: unexpected RALPH_ITEM_ID '$RALPH_ITEM_ID'" >&2; exit 1 ;;
esac
`

// learningMarker is the learning story 1 reports; story 2's prompt must
// carry it (through progress.md).
const learningMarker = "e2e-learning-4f1c9a"

const finalMessage = "Made the story's file with mark.sh.\n\n## Learnings\n- " + learningMarker + ": mark.sh picks the file from $RALPH_ITEM_ID\n\n<promise>COMPLETE</promise>"

const branch = "ralph/e2e-marks"

// twoStoryPRD: the PRD-wide test gate (it passes at the base, where
// one.txt does not exist yet) and each story's own checks.
const twoStoryPRD = `{
  "project": "e2e",
  "branch_name": "` + branch + `",
  "user_stories": [
    {"id": "US-001", "title": "Mark one", "description": "Create one.txt containing the line one.",
     "acceptance_criteria": ["one.txt holds one"], "priority": 1, "passes": false,
     "checks": ["grep -qx one one.txt", "test ! -e mark.sh"]},
    {"id": "US-002", "title": "Mark two", "description": "Create two.txt containing the line two.",
     "acceptance_criteria": ["two.txt holds two"], "priority": 2, "passes": false,
     "checks": ["grep -qx two two.txt"]}
  ],
  "quality_checks": {"test": "test ! -e one.txt || grep -qx one one.txt"}
}
`

const oneStoryPRD = `{
  "project": "e2e",
  "branch_name": "` + branch + `",
  "user_stories": [
    {"id": "US-001", "title": "Mark one", "description": "Create one.txt containing the line one.",
     "acceptance_criteria": ["one.txt holds one"], "priority": 1, "passes": false,
     "checks": ["grep -qx one one.txt"]}
  ],
  "quality_checks": {"test": "test ! -e one.txt || grep -qx one one.txt"}
}
`

// storySteps are the three scripted turns every story plays.
func storySteps(c cliCase, dir string) []llmtest.Step {
	return []llmtest.Step{
		{ToolCalls: []llmtest.ToolCall{c.write(dir, "mark.sh", markScript)}},
		{ToolCalls: []llmtest.ToolCall{c.shell("sh mark.sh && rm mark.sh")}},
		{Text: finalMessage},
	}
}

func runArgs(c cliCase, srv *llmtest.Server, extra ...string) []string {
	return append([]string{"run", "--prd", "prd.json", "--agent", c.name, "--base-url", srv.URL(),
		"--iteration-timeout", "2m", "--rate-limit-backoff", "1s"}, extra...)
}

func TestRealCLIRun(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.name, func(t *testing.T) {
			requireCLI(t, c.bin)
			t.Run("full", func(t *testing.T) { testFullRun(t, c) })
			t.Run("ratelimit", func(t *testing.T) { testRateLimit(t, c) })
			t.Run("servererror", func(t *testing.T) { testServerError(t, c) })
		})
	}
}

// testFullRun: two stories, written by the CLI's own tools, verified by
// ralph's gates, committed, learnings carried forward.
func testFullRun(t *testing.T, c cliCase) {
	dir := newRepo(t, map[string]string{"prd.json": twoStoryPRD, "README.md": "# e2e\n"})
	srv := startServer(t, &llmtest.Script{Steps: storySteps(c, dir)})
	res := ralph(t, dir, nil, runArgs(c, srv, "--max-attempts", "1")...)
	t.Logf("%s: full 2-story run took %s, %d requests", c.name, res.duration.Round(1e6), len(srv.Requests()))
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n%s", res, transcripts(t, dir, "US-00"))
	}
	if !strings.Contains(res.stderr, "2/2 passed") {
		t.Errorf("summary does not say 2/2 passed\n%s", res)
	}

	// Files and commits on the feature branch.
	for name, want := range map[string]string{"one.txt": "one\n", "two.txt": "two\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "mark.sh")); !os.IsNotExist(err) {
		t.Errorf("mark.sh should have been removed by the agent's shell tool: %v", err)
	}
	if got, want := featureLog(t, dir, branch), []string{"feat(US-002): Mark two", "feat(US-001): Mark one"}; !slices.Equal(got, want) {
		t.Errorf("git log main..%s = %q, want %q", branch, got, want)
	}
	if cur := git(t, dir, "branch", "--show-current"); cur != branch {
		t.Errorf("current branch %q, want %q", cur, branch)
	}
	if files := git(t, dir, "show", "--name-only", "--format=", "HEAD~1"); !strings.Contains(files, "one.txt") {
		t.Errorf("US-001's commit does not hold one.txt: %q", files)
	}
	if files := git(t, dir, "show", "--name-only", "--format=", "HEAD"); !strings.Contains(files, "two.txt") {
		t.Errorf("US-002's commit does not hold two.txt: %q", files)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("work tree not clean after the run:\n%s", st)
	}

	// ralph's state.
	st := loadState(t, dir)
	if st.Status != engine.StatusComplete {
		t.Errorf("state status %q, want complete", st.Status)
	}
	for _, id := range []string{"US-001", "US-002"} {
		is := st.Items[id]
		if is == nil || is.Status != engine.ItemPassed || is.Attempts != 0 || is.Commit == "" {
			t.Errorf("state of %s = %+v, want passed with 0 attempts spent", id, is)
		}
	}

	// Learnings: story 1's final message → progress.md → story 2's prompt.
	first := promptRequests(srv, "US-001")
	second := promptRequests(srv, "US-002")
	if len(first) == 0 || len(second) == 0 {
		t.Fatalf("no model request carrying the prompt of US-001 (%d) or US-002 (%d)", len(first), len(second))
	}
	if strings.Contains(string(first[0].Body), learningMarker) {
		t.Errorf("US-001's prompt already has the learning marker; the test proves nothing")
	}
	if !strings.Contains(string(second[0].Body), learningMarker) {
		t.Errorf("US-002's prompt does not carry US-001's learning %q:\n%s", learningMarker, tail(string(second[0].Body), 3000))
	}
	if msg := git(t, dir, "log", "-1", "--format=%B", "HEAD~1"); !strings.Contains(msg, learningMarker) {
		t.Errorf("US-001's commit message does not list its learning:\n%s", msg)
	}

	// ralph log reads the CLI's stream as its tool calls and its text.
	logRes := ralph(t, dir, nil, "log", "1")
	wantTools := map[string][]string{
		"claude":   {"→ Write mark.sh", "→ Bash sh mark.sh && rm mark.sh"},
		"codex":    {"→ Bash cat > mark.sh", "→ Bash sh mark.sh && rm mark.sh"},
		"opencode": {"→ Write mark.sh", "→ Bash sh mark.sh && rm mark.sh"},
		"gemini":   {"→ write_file mark.sh", "→ run_shell_command sh mark.sh && rm mark.sh"},
		"copilot":  {"→ create mark.sh", "→ bash sh mark.sh && rm mark.sh"},
	}[c.name]
	for _, want := range append(wantTools, "Made the story's file with mark.sh.", "[ralph] US-001 passed") {
		if !strings.Contains(logRes.stdout, want) {
			t.Errorf("ralph log 1 lacks %q:\n%s", want, logRes.stdout)
		}
	}
	if strings.Contains(logRes.stdout, `{"type"`) {
		t.Errorf("ralph log 1 shows raw stream JSON:\n%s", logRes.stdout)
	}
}

// testRateLimit: one 429 on the first model request. With the CLI's own
// retries capped (RALPH_AGENT_MAX_RETRIES=0) the CLI fails with a rate
// limit, ralph waits (Retry-After 1s / --rate-limit-backoff 1s) and runs the
// same story again without spending an attempt.
func testRateLimit(t *testing.T, c cliCase) {
	dir := newRepo(t, map[string]string{"prd.json": oneStoryPRD})
	steps := storySteps(c, dir)
	steps[0].Status, steps[0].Times, steps[0].RetryAfter = 429, 1, 1
	srv := startServer(t, &llmtest.Script{Steps: steps})
	res := ralph(t, dir, []string{"RALPH_AGENT_MAX_RETRIES=0"}, runArgs(c, srv, "--max-attempts", "1")...)
	t.Logf("%s: rate-limited run took %s, %d requests, %d faults", c.name, res.duration.Round(1e6), len(srv.Requests()), faults(srv))
	if res.code != 0 {
		t.Fatalf("ralph run failed (with --max-attempts 1 a spent attempt would block the story)\n%s\n%s", res, transcripts(t, dir, "US-001"))
	}
	if faults(srv) != 1 {
		t.Errorf("the server answered %d faults, want the one 429", faults(srv))
	}
	st := loadState(t, dir)
	is := st.Items["US-001"]
	if is == nil || is.Status != engine.ItemPassed || is.Attempts != 0 {
		t.Fatalf("US-001 state = %+v, want passed with 0 attempts spent", is)
	}
	limited := eventsOf(loadEvents(t, dir), "rate_limited")
	if !c.retryCapped {
		// The CLI retried the 429 itself: ralph never saw it.
		t.Logf("%s absorbed the 429 with its own retry (no way to cap it); the run passed in one agent run (runs=%d, rate_limited events=%d)", c.name, is.Runs, len(limited))
		return
	}
	if len(limited) != 1 || limited[0].Item != "US-001" {
		t.Fatalf("want one rate_limited event for US-001, got %+v\n%s", limited, res)
	}
	if is.Runs != 2 || st.Refunds != 1 {
		t.Errorf("US-001 runs = %d, state refunds = %d; want 2 agent runs, 1 refunded", is.Runs, st.Refunds)
	}
	if !strings.Contains(res.stderr, "rate limited") {
		t.Errorf("ralph's output does not report the rate limit\n%s", res)
	}
}

// testServerError: the endpoint answers 500 to every model request: the
// agent run fails, which is a failed iteration (an attempt is spent), and
// the transcript keeps what the CLI said.
func testServerError(t *testing.T, c cliCase) {
	dir := newRepo(t, map[string]string{"prd.json": oneStoryPRD})
	steps := storySteps(c, dir)
	// Retry-After 1s keeps a CLI that retries 5xx by itself (opencode,
	// which has no retry setting) from backing off for a minute.
	steps[0].Status, steps[0].Times, steps[0].RetryAfter = 500, 1000, 1
	steps[0].ErrorMessage = "e2e injected server error"
	srv := startServer(t, &llmtest.Script{Steps: steps})
	res := ralph(t, dir, []string{"RALPH_AGENT_MAX_RETRIES=0"}, runArgs(c, srv, "--max-attempts", "1")...)
	t.Logf("%s: HTTP 500 run took %s, %d requests, %d faults", c.name, res.duration.Round(1e6), len(srv.Requests()), faults(srv))
	if res.code != 4 {
		t.Fatalf("exit %d, want 4 (story blocked after its one attempt)\n%s", res.code, res)
	}
	st := loadState(t, dir)
	is := st.Items["US-001"]
	if is == nil || is.Attempts < 1 || is.Status != engine.ItemBlocked {
		t.Fatalf("US-001 state = %+v, want blocked with an attempt spent", is)
	}
	if !strings.Contains(is.LastResult, "agent") {
		t.Errorf("last result %q does not say the agent run failed", is.LastResult)
	}
	if n := len(eventsOf(loadEvents(t, dir), "rate_limited")); n != 0 {
		t.Errorf("a 500 is not a rate limit, got %d rate_limited events", n)
	}
	tr := transcripts(t, dir, "US-001")
	// Codex words any 5xx as "We're currently experiencing high demand".
	if !containsAny(tr, "500", "Internal Server Error", "e2e injected server error", "high demand") {
		t.Errorf("the transcript does not show the server error:\n%s", tail(tr, 4000))
	}
	if !strings.Contains(tr, "not passed") {
		t.Errorf("the transcript does not record the failed iteration:\n%s", tail(tr, 2000))
	}
	if faults(srv) == 0 {
		t.Errorf("the server served no fault")
	}
}

// TestRealCLINotInstalled: a CLI that is nowhere to be found is found by
// the preflight, before anything is written: one clear line naming the
// install command, exit 2.
func TestRealCLINotInstalled(t *testing.T) {
	empty := t.TempDir()
	for _, c := range append(slices.Clone(cliCases), cliCase{name: "amp", bin: "amp", pkg: "@sourcegraph/amp"}) {
		t.Run(c.name, func(t *testing.T) {
			dir := newRepo(t, map[string]string{"prd.json": oneStoryPRD})
			env := []string{"RALPH_AGENTS_DIR=" + empty, "PATH=" + pathWithout(c.bin)}
			res := ralph(t, dir, env, "run", "--prd", "prd.json", "--agent", c.name, "--base-url", "http://127.0.0.1:9")
			if res.code != 2 {
				t.Fatalf("exit %d, want 2 (the preflight)\n%s", res.code, res)
			}
			for _, want := range []string{"preflight", "nothing was started", "not installed", c.bin, "npm install -g " + c.pkg} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr does not mention %q\n%s", want, res)
				}
			}
			if n := strings.Count(res.stderr, "not installed"); n != 1 {
				t.Errorf("the problem is printed %d times\n%s", n, res)
			}
			// Found before anything was written: no state, no branch.
			if _, err := os.Stat(filepath.Join(dir, ".ralph", "state.json")); err == nil {
				t.Error("the run wrote its state before finding the CLI missing")
			}
			if out := git(t, dir, "branch", "--list", "ralph/*"); strings.TrimSpace(out) != "" {
				t.Errorf("the run made a branch before finding the CLI missing: %s", out)
			}
		})
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// pathWithout is $PATH minus every folder that holds bin.
func pathWithout(bin string) string {
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, bin)); err == nil {
			continue
		}
		keep = append(keep, d)
	}
	return strings.Join(keep, string(os.PathListSeparator))
}
