package review

import (
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/prd"
)

const answer = `I read the diff.

- [major] calc/add.go:12 — Add ignores overflow: it wraps silently
  Use math/bits or return an error.
  Add a test with MaxInt.
- [nit] README.md — typo "teh"
* [Critical] ` + "`internal/x/y.go:3-9`" + `: SQL built by string concatenation
- [high] missing test for Sub
1. [low] the flag's help has no value name

Summary: two things to fix.

REVIEW: changes`

func TestParseFindings(t *testing.T) {
	fs := ParseFindings(answer, "reviewer")
	want := []Finding{
		{Severity: "major", Where: "calc/add.go:12", Title: "Add ignores overflow: it wraps silently", Detail: "Use math/bits or return an error.\nAdd a test with MaxInt.", Reviewer: "reviewer"},
		{Severity: "nit", Where: "README.md", Title: `typo "teh"`, Reviewer: "reviewer"},
		{Severity: "critical", Where: "internal/x/y.go:3-9", Title: "SQL built by string concatenation", Reviewer: "reviewer"},
		{Severity: "major", Title: "missing test for Sub", Reviewer: "reviewer"},
		{Severity: "minor", Title: "the flag's help has no value name", Reviewer: "reviewer"},
	}
	if len(fs) != len(want) {
		t.Fatalf("got %d findings: %+v", len(fs), fs)
	}
	for i := range want {
		if fs[i] != want[i] {
			t.Errorf("finding %d = %+v\nwant %+v", i, fs[i], want[i])
		}
	}
	if fs := ParseFindings("Looks good.\n\nREVIEW: approve", "r"); len(fs) != 0 {
		t.Errorf("no findings: %+v", fs)
	}
}

func FuzzParseFindings(f *testing.F) {
	f.Add(answer)
	f.Add("- [nit]\n  \n- [major] a.go:1 —")
	f.Fuzz(func(t *testing.T, s string) {
		for _, fd := range ParseFindings(s, "r") {
			if rank(fd.Severity) >= len(Severities) || fd.Title == "" || strings.Contains(fd.Title, "\n") {
				t.Errorf("finding %+v from %q", fd, s)
			}
		}
	})
}

func TestReportVerdictMarkdownPRD(t *testing.T) {
	r := Report{ID: "r1", Base: "main", BaseSHA: "aaaaaaaaaaaa", Head: "feature", HeadSHA: "bbbbbbbbbbbb", Commits: 2, Files: []string{"a.go"},
		Reviewers: []Reviewer{
			{Name: "reviewer", Kind: "role", Agent: "claude", Verdict: "approve", Findings: ParseFindings(answer, "reviewer")},
			{Name: "command 1", Kind: "command", Command: "lint-review", Findings: []Finding{{Severity: "minor", Title: "x", Reviewer: "command 1"}}},
		}}
	if v := r.Verdict(); v != "changes" {
		t.Errorf("a critical finding: verdict %q", v)
	}
	md := r.Markdown()
	for _, want := range []string{"# Review r1", "feature (bbbbbbbb) against main (merge base aaaaaaaa), 2 commit(s), 1 file(s)", "reviewer (claude), command 1", "## Findings (6)", "- **[critical]** `internal/x/y.go:3-9` — SQL built", "Command: `lint-review`"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if i, j := strings.Index(md, "[critical]"), strings.Index(md, "[nit]"); i < 0 || j < i {
		t.Errorf("not most severe first:\n%s", md)
	}
	doc := r.PRD("feature", prd.QualityChecks{Test: "go test ./..."}, false)
	if doc == nil || len(doc.Stories) != 5 || doc.Stories[0].ID != "R-1" || !strings.Contains(doc.Stories[0].Description, "SQL built") || doc.BranchName != "feature" {
		t.Fatalf("PRD = %+v", doc)
	}
	if err := doc.Validate(); err != nil {
		t.Errorf("the PRD is not valid: %v", err)
	}
	if ok := (Report{Reviewers: []Reviewer{{Verdict: "approve"}}}).Verdict(); ok != "approve" {
		t.Errorf("every reviewer approved: %q", ok)
	}
	if (Report{Reviewers: []Reviewer{{Verdict: "approve"}}}).PRD("b", prd.QualityChecks{}, false) != nil {
		t.Error("no findings: a PRD")
	}
}
