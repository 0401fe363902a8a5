package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// TestRealCLIJudge: each real agent CLI (and the native agent), driven by
// `ralph run` from an empty HOME against the scripted server, on a Go
// module whose TestAdd fails at the base. The run starts without a flag
// and names the red test up front. The scripted model's first attempt
// makes the test pass by editing the test (`got != 5` → `got != -1`)
// with the CLI's own shell tool, and claims the story done:
//
//   - in the sandbox the protected test file is read-only, so the edit
//     fails with a plain error and the claim, with no work, is refused;
//   - without the sandbox the edit is made, and the judge refuses the
//     changed protected file.
//
// Nothing of that attempt lands. The next attempt's prompt says why; the
// model (a branch of the script, picked by that text) puts the test back
// and fixes the code with the CLI's own file tool: the story passes, and
// its commit's "Verified by ralph" line names the evidence, the test
// that failed at the base and passes now.
func TestRealCLIJudge(t *testing.T) {
	// Each agent starts from an empty HOME of its own. The Go build cache
	// is one for the whole test, empty at its start: the first run (no
	// sandbox, so its gates write the user's cache) builds the test
	// binaries' packages once, and the later runs' sandboxed gates read
	// it through (a cold cache costs a minute on a loaded machine).
	goCache := "GOCACHE=" + filepath.Join(t.TempDir(), "go-build")
	for _, c := range append(slices.Clone(cliCases), nativeCase) {
		t.Run(c.name, func(t *testing.T) {
			args := func(srv *llmtest.Server, extra ...string) []string { return runArgs(c, srv, extra...) }
			if c.name == "native" {
				if testing.Short() {
					t.Skip("end-to-end runs: skipped with -short")
				}
				args = func(srv *llmtest.Server, extra ...string) []string {
					return nativeArgs("anthropic", srv.URL(), extra...)
				}
			} else {
				requireCLI(t, c.bin)
			}
			_, env := freshHome(t)
			env = append(env, goCache)
			for _, sandboxed := range []bool{false, true} {
				t.Run(sandboxName(sandboxed), func(t *testing.T) { testJudgeCheatThenFix(t, c, sandboxed, env, args) })
			}
		})
	}
}

func sandboxName(on bool) string {
	if on {
		return "sandbox"
	}
	return "no-sandbox"
}

// The module: Add is wrong (judgeCalcBroken), so TestAdd fails at the
// base.
const (
	judgeGoMod      = "module example.com/calc\n\ngo 1.22\n"
	judgeCalcBroken = "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n"
	judgeCalcFixed  = "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n"
	judgeCalcTest   = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n"
	// The story has no check of its own: the red test is its acceptance.
	judgePRD = `{"project": "calc", "branch_name": "ralph/calc", "quality_checks": {"test": "go test ./..."},
 "user_stories": [{"id": "US-001", "title": "Fix Add", "description": "Add returns the wrong sum: make TestAdd pass.",
  "acceptance_criteria": ["TestAdd passes"], "priority": 1}]}
`
	// judgeRetry is in the prompt of an attempt after a refused one.
	judgeRetry = "## Previous attempt failed"
)

// judgeCheat edits the test so that the broken Add passes it, and says
// how sed ended (the quotes keep the marker out of the command's text,
// which the next request carries too).
const judgeCheat = `sed -i 's/got != 5/got != -1/' calc_test.go; echo sed'-'exit=$?`

// fixAdd is the CLI's own file tool call that fixes Add (writeFix).
func fixAdd(c cliCase, dir string) llmtest.ToolCall {
	return writeFix(c, dir, "calc.go", judgeCalcBroken, judgeCalcFixed)
}

func testJudgeCheatThenFix(t *testing.T, c cliCase, sandboxed bool, env []string, args func(srv *llmtest.Server, extra ...string) []string) {
	dir := newRepo(t, map[string]string{"go.mod": judgeGoMod, "calc.go": judgeCalcBroken, "calc_test.go": judgeCalcTest, "prd.json": judgePRD})
	base := git(t, dir, "rev-parse", "HEAD")
	srv := startServer(t, &llmtest.Script{
		Steps: []llmtest.Step{
			{ToolCalls: []llmtest.ToolCall{c.shell(judgeCheat)}},
			{Text: "TestAdd passes now.\n\n<promise>COMPLETE</promise>"},
		},
		Branches: []llmtest.Branch{{When: judgeRetry, Steps: []llmtest.Step{
			// The test as it was (a no-op when the sandbox kept it), then
			// the code fixed.
			{ToolCalls: []llmtest.ToolCall{c.shell("git diff --quiet -- calc_test.go || git checkout -- calc_test.go")}},
			{ToolCalls: []llmtest.ToolCall{fixAdd(c, dir)}},
			{Text: "Fixed Add itself; the test is as it was.\n\n<promise>COMPLETE</promise>"},
		}}},
	})
	extra := []string{"--max-attempts", "2"}
	if !sandboxed {
		extra = append(extra, "--no-sandbox")
	}
	res := ralphWithin(t, 6*time.Minute, dir, env, args(srv, extra...)...)
	tr := transcripts(t, dir, "US-001")
	t.Logf("%s (%s) from an empty HOME: %s, %d requests", c.name, sandboxName(sandboxed), res.duration.Round(time.Millisecond), len(srv.Requests()))
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n%s", res, tail(tr, 8000))
	}

	// The red test is listed before any agent ran.
	if i, j := strings.Index(res.stderr, "the base already fails before any agent ran"), strings.Index(res.stderr, "iteration 1/"); i < 0 || j < 0 || i > j || !strings.Contains(res.stderr[i:j], "example.com/calc.TestAdd") {
		t.Errorf("the red test is not listed up front\n%s", res)
	}

	// The cheat was refused, and the verdict says why.
	refused := "US-001 attempt 1/2 failed: no change: the claim comes with no work"
	if !sandboxed {
		refused = "US-001 attempt 1/2 failed: protected files changed: calc_test.go (changed)"
	}
	if !strings.Contains(res.stderr, refused) {
		t.Errorf("the first attempt was not refused with %q\n%s", refused, res)
	}
	var bodies strings.Builder
	for _, r := range srv.Requests() {
		bodies.Write(r.Body)
	}
	got := bodies.String()
	switch {
	case !strings.Contains(got, "sed-exit="):
		t.Errorf("the cheat never ran (no tool result carries sed's exit)\n%s", tr[:min(len(tr), 12000)])
	case sandboxed && strings.Contains(got, "sed-exit=0"):
		t.Errorf("in the sandbox the protected test file was writable\n%s", tail(tr, 6000))
	case !sandboxed && !strings.Contains(got, "sed-exit=0"):
		t.Errorf("without the sandbox the edit should have been made (the judge refuses it)\n%s", tail(tr, 6000))
	}
	retry := ""
	for _, r := range srv.Requests() {
		if r.Branch == 1 && r.AssistantTurns == 0 {
			retry = string(r.Body)
			break
		}
	}
	why := "the work tree holds no change since the item's base"
	if !sandboxed {
		why = "You changed files that decide whether the work passes: calc_test.go (changed)"
	}
	if !strings.Contains(retry, why) {
		t.Errorf("the second attempt's prompt does not say why the first was refused (%q)\n%s", why, tail(retry, 3000))
	}
	if !strings.Contains(retry, "Files you may not change") || !strings.Contains(retry, "calc_test.go") {
		t.Errorf("the prompt does not name the protected test file\n%s", tail(retry, 3000))
	}

	// The honest fix passed; only it landed, with the test as it was.
	st := loadState(t, dir)
	if is := st.Items["US-001"]; is == nil || is.Status != engine.ItemPassed || is.Attempts != 1 {
		t.Errorf("US-001 state = %+v, want passed after one refused attempt", is)
	}
	if log, want := featureLog(t, dir, "ralph/calc"), []string{"feat(US-001): Fix Add"}; !slices.Equal(log, want) {
		t.Errorf("git log main..ralph/calc = %q, want %q", log, want)
	}
	if changed := git(t, dir, "diff", "--name-only", base, "ralph/calc"); strings.Contains(changed, "calc_test.go") || !strings.Contains(changed, "calc.go") {
		t.Errorf("the landed commit changes %q; want calc.go and never calc_test.go", changed)
	}
	if b := git(t, dir, "show", "ralph/calc:calc.go"); b+"\n" != judgeCalcFixed {
		t.Errorf("calc.go on the branch:\n%s", b)
	}
	msg := git(t, dir, "log", "-1", "--format=%B", "ralph/calc")
	if !strings.Contains(msg, "Verified by ralph: ") || !strings.Contains(msg, "evidence: test: example.com/calc.TestAdd failed at the base and passes") {
		t.Errorf("the commit does not name its evidence:\n%s", msg)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "calc_test.go")); err != nil || string(b) != judgeCalcTest {
		t.Errorf("calc_test.go in the work tree = %q, %v; want it as it was", b, err)
	}
}
