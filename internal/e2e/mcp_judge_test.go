package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMCPRunJudges: MCP's run tool (wait: true) goes through the same
// judge as `ralph run`.
//
// On a green base, no-op and bare-claim agents never pass: S-1's agent
// makes an empty commit and says done, S-2's (a story without checks)
// writes a file that proves nothing, S-3's only says done (three
// different failures in turn: the run's circuit breaker stops a run at
// the same failure five times in a row). The control,
// S-4, adds Mul with its test (which fails on the base's code) and
// passes; the run reports 1 of 4 passed, blocked (exit 4), and only S-4
// landed.
//
// A TDD repository (its test fails at the base) runs with no flag (the
// tool has none to give): the red test is listed before any agent runs,
// a claim with no change is refused, the honest fix passes with TestAdd
// as its evidence.
func TestMCPRunJudges(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	const agent = `cat > /dev/null
case "$RALPH_ITEM_ID/$RALPH_ATTEMPT" in
S-1/*) git commit -q --allow-empty -m 'feat: Sub (done)' ;;
S-2/*) echo 'Add adds two ints.' > NOTES.md ;;
S-4/*)
	printf 'package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n' > mul.go
	printf 'package calc\n\nimport "testing"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal("Mul")\n\t}\n}\n' > mul_test.go
	;;
FIX/1) ;;
FIX/*) sed -i 's/a - b/a + b/' calc.go ;;
esac
echo '<promise>COMPLETE</promise>'
`
	agentFile := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(agentFile, []byte(agent), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, dir string) (map[string]any, string) {
		t.Helper()
		_, callTool := mcpClient(ctx, t, dir)
		out, text, isErr := callTool("run", map[string]any{"agent": "cmd", "agent_cmd": "sh " + agentFile, "wait": true})
		if isErr {
			t.Fatalf("run: %s", text)
		}
		log, _ := os.ReadFile(filepath.Join(dir, ".ralph", "mcp-run.log"))
		return out, string(log)
	}

	t.Run("green base", func(t *testing.T) {
		dir := newRepo(t, map[string]string{"go.mod": judgeGoMod, "calc_test.go": judgeCalcTest, "calc.go": judgeCalcFixed,
			"prd.json": `{"project": "p", "branch_name": "ralph/p", "quality_checks": {"test": "go test ./..."}, "user_stories": [
 {"id": "S-1", "title": "Sub", "description": "Add Sub(a, b int) int.", "priority": 1, "checks": ["go test -run TestSub ./..."]},
 {"id": "S-2", "title": "Notes", "description": "Document Add.", "priority": 2},
 {"id": "S-3", "title": "Div", "description": "Add Div(a, b int) int.", "priority": 3},
 {"id": "S-4", "title": "Mul", "description": "Add Mul(a, b int) int with its test TestMul.", "priority": 4, "checks": ["go test -run TestMul ./..."]}]}
`})
		out, log := run(t, dir)
		if out["done"] != true || out["exit_code"] != 4.0 || out["all_passed"] != false || out["ready_to_merge"] != false || out["passed"] != 1.0 || out["total"] != 4.0 {
			t.Errorf("run returned %v, want done, exit 4, 1 of 4 passed\n%s", out, tail(log, 6000))
		}
		for _, want := range []string{
			"S-1 attempt 3/3 failed: no change: the claim comes with no work",
			"S-2 attempt 3/3 failed: no evidence: nothing that failed at the base passes now",
			"S-3 attempt 3/3 failed: no change: the claim comes with no work",
			"S-4 passed (test passed (2 passed, 0 failed, 0 skipped), S-4 check 1 passed (1 passed, 0 failed, 0 skipped); evidence: new test test: example.com/calc.TestMul passes and fails on the base's code",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("the run's log lacks %q\n%s", want, tail(log, 6000))
			}
		}
		if strings.Contains(log, "the base already fails") {
			t.Errorf("a green base was called red\n%s", tail(log, 6000))
		}
		if got, want := featureLog(t, dir, "ralph/p"), []string{"feat(S-4): Mul"}; !slices.Equal(got, want) {
			t.Errorf("git log main..ralph/p = %q, want %q", got, want)
		}
		if changed := git(t, dir, "diff", "--name-only", "main", "ralph/p"); changed != "mul.go\nmul_test.go\nprd.json" {
			t.Errorf("the branch changes %q; want only S-4's files and its mark", changed)
		}
	})

	t.Run("TDD repository", func(t *testing.T) {
		dir := newRepo(t, map[string]string{"go.mod": judgeGoMod, "calc_test.go": judgeCalcTest, "calc.go": judgeCalcBroken,
			"prd.json": `{"project": "p", "branch_name": "ralph/p", "quality_checks": {"test": "go test ./..."}, "user_stories": [
 {"id": "FIX", "title": "Fix Add", "description": "Add returns the wrong sum: make TestAdd pass.", "priority": 1}]}
`})
		out, log := run(t, dir)
		if out["done"] != true || out["exit_code"] != 0.0 || out["all_passed"] != true || out["passed"] != 1.0 || out["total"] != 1.0 {
			t.Errorf("run returned %v, want done, exit 0, all passed\n%s", out, tail(log, 6000))
		}
		red, first := strings.Index(log, "the base already fails before any agent ran"), strings.Index(log, "iteration 1/")
		if red < 0 || first < red || !strings.Contains(log[red:first], "example.com/calc.TestAdd") {
			t.Errorf("the red test is not listed before any agent ran\n%s", tail(log, 6000))
		}
		for _, want := range []string{
			"FIX attempt 1/3 failed: no change: the claim comes with no work",
			"FIX passed (test passed (1 passed, 0 failed, 0 skipped); evidence: test: example.com/calc.TestAdd failed at the base and passes)",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("the run's log lacks %q\n%s", want, tail(log, 6000))
			}
		}
		if got, want := featureLog(t, dir, "ralph/p"), []string{"feat(FIX): Fix Add"}; !slices.Equal(got, want) {
			t.Errorf("git log main..ralph/p = %q, want %q", got, want)
		}
		if b := git(t, dir, "show", "ralph/p:calc.go"); !strings.Contains(b, "return a + b") {
			t.Errorf("calc.go on the branch:\n%s", b)
		}
		if changed := git(t, dir, "diff", "--name-only", "main", "ralph/p", "--", "calc_test.go"); changed != "" {
			t.Errorf("the test was changed: %q", changed)
		}
	})
}
