package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/demo"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// The native agent (ralph's own tool loop) through a whole `ralph run`
// against the scripted server's Anthropic Messages and OpenAI Chat
// Completions endpoints. Its tools: write_file {path, content} and bash
// {command} (bash inherits ralph's environment, RALPH_ITEM_ID included).

var nativeProviders = []struct {
	provider string
	baseURL  func(srv *llmtest.Server) string
	api      string // what the server logs for its requests
}{
	{"anthropic", func(srv *llmtest.Server) string { return srv.URL() }, llmtest.APIAnthropic},
	{"openai", func(srv *llmtest.Server) string { return srv.URL() + "/v1" }, llmtest.APIChat},
}

var nativeCase = cliCase{
	name: "native",
	write: func(dir, path, content string) llmtest.ToolCall {
		return tc("write_file", map[string]any{"path": path, "content": content})
	},
	shell: func(command string) llmtest.ToolCall {
		return tc("bash", map[string]any{"command": command})
	},
}

func nativeArgs(provider, baseURL string, extra ...string) []string {
	return append([]string{"run", "--prd", "prd.json", "--agent", "native", "--provider", provider,
		"--base-url", baseURL, "--model", "m", "--iteration-timeout", "2m", "--rate-limit-backoff", "1s"}, extra...)
}

func TestNativeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs: skipped with -short")
	}
	for _, p := range nativeProviders {
		t.Run(p.provider, func(t *testing.T) {
			dir := newRepo(t, map[string]string{"prd.json": twoStoryPRD, "README.md": "# e2e\n"})
			srv := startServer(t, &llmtest.Script{Steps: storySteps(nativeCase, dir)})
			res := ralph(t, dir, nil, nativeArgs(p.provider, p.baseURL(srv), "--max-attempts", "1")...)
			t.Logf("native/%s: full 2-story run took %s, %d requests", p.provider, res.duration.Round(1e6), len(srv.Requests()))
			if res.code != 0 {
				t.Fatalf("ralph run failed\n%s\n%s", res, transcripts(t, dir, "US-00"))
			}
			for _, r := range srv.Requests() {
				if r.API != p.api {
					t.Errorf("request to %s (%s), want only %s", r.Path, r.API, p.api)
				}
			}
			for name, want := range map[string]string{"one.txt": "one\n", "two.txt": "two\n"} {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
					t.Errorf("%s = %q, %v; want %q", name, b, err, want)
				}
			}
			if got, want := featureLog(t, dir, branch), []string{"feat(US-002): Mark two", "feat(US-001): Mark one"}; !slices.Equal(got, want) {
				t.Errorf("git log main..%s = %q, want %q", branch, got, want)
			}
			st := loadState(t, dir)
			for _, id := range []string{"US-001", "US-002"} {
				if is := st.Items[id]; is == nil || is.Status != engine.ItemPassed || is.Attempts != 0 {
					t.Errorf("state of %s = %+v, want passed with 0 attempts spent", id, is)
				}
			}
			second := promptRequests(srv, "US-002")
			if len(second) == 0 || !strings.Contains(string(second[0].Body), learningMarker) {
				t.Errorf("US-002's prompt does not carry US-001's learning %q", learningMarker)
			}
		})
	}
}

// TestNativeRateLimit: the native agent has no retries of its own, so a
// 429 always reaches ralph.
func TestNativeRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs: skipped with -short")
	}
	for _, p := range nativeProviders {
		t.Run(p.provider, func(t *testing.T) {
			dir := newRepo(t, map[string]string{"prd.json": oneStoryPRD})
			steps := storySteps(nativeCase, dir)
			steps[1].Status, steps[1].Times, steps[1].RetryAfter = 429, 1, 1 // mid-run, after the write
			srv := startServer(t, &llmtest.Script{Steps: steps})
			res := ralph(t, dir, nil, nativeArgs(p.provider, p.baseURL(srv), "--max-attempts", "1")...)
			if res.code != 0 {
				t.Fatalf("ralph run failed\n%s\n%s", res, transcripts(t, dir, "US-001"))
			}
			st := loadState(t, dir)
			if is := st.Items["US-001"]; is == nil || is.Status != engine.ItemPassed || is.Attempts != 0 || is.Runs != 2 {
				t.Errorf("US-001 state = %+v, want passed after 2 runs with 0 attempts spent", is)
			}
			if n := len(eventsOf(loadEvents(t, dir), "rate_limited")); n != 1 {
				t.Errorf("%d rate_limited events, want 1\n%s", n, res)
			}
		})
	}
}

// demoStory is the one bash command every demo story runs: it makes that
// story's change to calc/calc.go (the model's turn is the same for every
// story; the story comes from $RALPH_ITEM_ID).
const demoStory = `set -e
case "$RALPH_ITEM_ID" in
US-001) sed -i 's/^func Add(a, b int) int { return 0 }$/func Add(a, b int) int { return a + b }/' calc/calc.go ;;
US-002) sed -i 's/^func Sub(a, b int) int { return 0 }$/func Sub(a, b int) int { return a - b }/' calc/calc.go ;;
US-003) cat > calc/calc.go <<'RALPH_EOF'
` + demo.FinalCalc + `RALPH_EOF
;;
*) echo "unexpected story $RALPH_ITEM_ID" >&2; exit 1 ;;
esac
go test -count=1 ./calc/ 2>&1 | tail -n 3 || true`

const demoMarker = "demo-learning-93b2e1"

// TestNativeDemo: the native agent runs the demo PRD (three stories, Go
// gates) against the scripted server, one pass per story.
func TestNativeDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs: skipped with -short")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demo.Create(t.Context(), base); err != nil {
		t.Fatal(err)
	}
	dir := demo.ProjectDir(base)
	srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
		{Text: "Making this story's change.", ToolCalls: []llmtest.ToolCall{tc("bash", map[string]any{"command": demoStory})}},
		{Text: "Done; the story's check passes.\n\n## Learnings\n- " + demoMarker + ": calc.go holds every operation\n\n<promise>COMPLETE</promise>"},
	}})
	res := ralph(t, dir, nil, nativeArgs("anthropic", srv.URL(), "--max-attempts", "1")...)
	t.Logf("native demo: 3-story run took %s, %d requests", res.duration.Round(1e6), len(srv.Requests()))
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n%s", res, transcripts(t, dir, "US-00"))
	}
	b, err := os.ReadFile(filepath.Join(dir, "calc", "calc.go"))
	if err != nil || string(b) != demo.FinalCalc {
		t.Errorf("calc/calc.go after the run:\n%s (%v)", b, err)
	}
	const demoBranch = "ralph/calculator-basics"
	want := []string{"feat(US-003): Evaluate sums like 1+2-3", "feat(US-002): Subtract two numbers", "feat(US-001): Add two numbers"}
	if got := featureLog(t, dir, demoBranch); !slices.Equal(got, want) {
		t.Errorf("git log main..%s = %q, want %q", demoBranch, got, want)
	}
	for i, rev := range []string{"HEAD~2", "HEAD~1", "HEAD"} {
		if files := git(t, dir, "show", "--name-only", "--format=", rev); !strings.Contains(files, "calc/calc.go") {
			t.Errorf("%s (%s) does not change calc/calc.go: %q", want[2-i], rev, files)
		}
	}
	st := loadState(t, dir)
	for _, id := range []string{"US-001", "US-002", "US-003"} {
		if is := st.Items[id]; is == nil || is.Status != engine.ItemPassed || is.Attempts != 0 {
			t.Errorf("state of %s = %+v, want passed in one pass", id, is)
		}
	}
	if r := promptRequests(srv, "US-003"); len(r) == 0 || !strings.Contains(string(r[0].Body), demoMarker) {
		t.Errorf("US-003's prompt does not carry the earlier stories' learning %q", demoMarker)
	}
}
