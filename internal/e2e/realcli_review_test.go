package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/llmtest"
	"github.com/ralph-loop/ralph/internal/review"
)

// TestRealCLIReview: `ralph review` with the real Claude Code as the
// reviewer role, against the scripted model server. Claude Code gets the
// reviewer's text and the branch's diff, runs git in its scratch
// worktree with its own Bash tool, and answers with findings; ralph
// writes them to .ralph/reviews/<id>.md and .json and commits nothing.
func TestRealCLIReview(t *testing.T) {
	c := cliCases[0]
	requireCLI(t, c.bin)
	dir := newRepo(t, map[string]string{"calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n"})
	git(t, dir, "checkout", "-q", "-b", "feature")
	if err := os.WriteFile(filepath.Join(dir, "calc.go"), []byte("package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return a + b }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "commit", "-qam", "add Sub")
	head := git(t, dir, "rev-parse", "HEAD")
	const finding = "Sub returns a+b, it must subtract (e2e-review-5c1e)"
	srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
		{ToolCalls: []llmtest.ToolCall{c.shell("git log --oneline -3 && git diff HEAD~1 --stat")}},
		{Text: "I read the diff.\n\n- [major] calc.go:5 — " + finding + "\n  Return a - b and add a test.\n\nREVIEW: changes"},
	}})
	res := ralph(t, dir, nil, "review", "--base", "main", "--role", "reviewer", "--agent", c.name, "--base-url", srv.URL(), "--timeout", "2m")
	if res.code != 0 {
		t.Fatalf("ralph review failed\n%s", res)
	}
	for _, want := range []string{"reviewer: 1 finding, changes", "verdict changes"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("ralph's output lacks %q\n%s", want, res)
		}
	}
	if !strings.Contains(res.stdout, "**[major]** `calc.go:5` — "+finding) {
		t.Errorf("the report on the terminal lacks the finding:\n%s", res.stdout)
	}
	// The request carried the role's text and the diff; Claude ran git.
	var first string
	for _, r := range srv.Requests() {
		if !r.Side && strings.Contains(string(r.Body), "# Role: Reviewer") {
			first = string(r.Body)
			break
		}
	}
	if first == "" || !strings.Contains(first, `+func Sub(a, b int) int { return a + b }`) || !strings.Contains(first, "REVIEW: approve") {
		t.Errorf("no request with the reviewer's text and the diff:\n%s", tail(first, 3000))
	}
	// The report files; nothing committed, the tree untouched.
	jsons, _ := filepath.Glob(filepath.Join(dir, ".ralph", "reviews", "*.json"))
	if len(jsons) != 1 {
		t.Fatalf("review reports: %v", jsons)
	}
	var rep review.Report
	b, _ := os.ReadFile(jsons[0])
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Reviewers) != 1 || rep.Reviewers[0].Agent != "claude" || len(rep.Reviewers[0].Findings) != 1 || rep.Reviewers[0].Findings[0].Where != "calc.go:5" || rep.HeadSHA != head {
		t.Errorf("report = %+v", rep)
	}
	tr, _ := os.ReadFile(filepath.Join(dir, rep.Reviewers[0].Transcript))
	if !strings.Contains(string(tr), "git log --oneline -3") {
		t.Errorf("the transcript lacks Claude Code's Bash call:\n%s", tail(string(tr), 3000))
	}
	if got := git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved: %s", got)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the tree changed:\n%s", st)
	}
	if wt := git(t, dir, "worktree", "list"); strings.Count(wt, "\n") != 0 {
		t.Errorf("a worktree was left:\n%s", wt)
	}
}
