package github

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/ghtest"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

func issue(n int, title, body string, labels ...string) Issue {
	is := Issue{Number: n, Title: title, Body: body}
	for _, l := range labels {
		is.Labels = append(is.Labels, struct {
			Name string `json:"name"`
		}{l})
	}
	return is
}

func TestIssuesPRD(t *testing.T) {
	huge := strings.Repeat("x", 100<<10)
	doc, err := IssuesPRD("label:ralph", []Issue{
		issue(12, "Later", "depends on #3, #7 and #99\n- [ ] a\n```\n- [ ] not a criterion\n```\n* [x] b", "critical", "ui"),
		issue(3, "First\nline", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 "+huge),
		issue(7, "Self", "Depends-On: #7"),
	}, []prd.Gate{{Name: "test", Command: "go test ./..."}, {Name: "vet", Command: "go vet ./..."}, {Name: "test", Command: "make t"},
		{Name: "a", Command: "1"}, {Name: "b", Command: "2"}, {Name: "c", Command: "3"}}, "ralph/issues", func(s string) string {
		return strings.ReplaceAll(s, "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_****")
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, s := range doc.Stories {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, " ") != "issue-3 issue-7 issue-12" {
		t.Fatalf("order %v", ids)
	}
	s3, s7, s12 := doc.Stories[0], doc.Stories[1], doc.Stories[2]
	if s3.Title != "First line (#3)" || strings.Contains(s3.Description, "ghp_abc") || len(s3.Description) > maxBody+200 {
		t.Fatalf("issue 3: %q, %d bytes", s3.Title, len(s3.Description))
	}
	if len(s7.DependsOn) != 0 {
		t.Fatalf("a self-dependency: %v", s7.DependsOn)
	}
	if strings.Join(s12.DependsOn, ",") != "issue-3,issue-7" || !s12.Critical || strings.Join(s12.AcceptanceCriteria, ",") != "a,b" || s12.Notes != "labels: critical, ui" {
		t.Fatalf("issue 12: %+v", s12)
	}
	q := doc.QualityChecks
	if q.Test != "go test ./..." || q.Build != "go vet ./..." || q.Lint != "make t" || q.Typecheck != "1" || strings.Join(s12.Checks, ",") != "2,3" {
		t.Fatalf("gates %+v, checks %v", q, s12.Checks)
	}
}

// TestReportOnceAcrossACrash: a report recorded pending (gh was asked,
// then ralph died) is looked for on the issue, not posted twice; one
// that never reached GitHub is posted; a report made is never repeated.
func TestReportOnceAcrossACrash(t *testing.T) {
	if _, err := exec.LookPath("gh"); err != nil {
		t.Skip("gh is not installed (scripts/install-tools.sh installs it)")
	}
	srv, err := ghtest.Start(t.TempDir(), "acme", "widgets")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", srv.RemoteURL()}} {
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	one := srv.AddIssue("one", "")
	two := srv.AddIssue("two", "")
	gh := &GH{Dir: dir, Env: append(os.Environ(), srv.Env(filepath.Join(dir, ".gh"))...)}
	ctx := context.Background()
	st := &engine.State{RunID: "r1", Branch: "ralph/issues", Order: []string{StoryID(one), StoryID(two)}, Items: map[string]*engine.ItemState{
		StoryID(one): {ID: StoryID(one), Status: engine.ItemPassed, Commit: "c1", LastResult: "test passed"},
		StoryID(two): {ID: StoryID(two), Status: engine.ItemPassed, Commit: "c2", LastResult: "test passed"},
	}}
	record := filepath.Join(dir, RecordFile)
	// The crash: #1's report reached GitHub, #2's did not; both pending.
	k1, k2 := "passed:"+StoryID(one)+":c1", "passed:"+StoryID(two)+":c2"
	if err := gh.Comment(ctx, one, "earlier\n\n<!-- ralph:"+k1+" -->"); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteJSON(record, &Record{Posts: map[string]*Post{k1: {Issue: one, State: "pending"}, k2: {Issue: two, State: "pending"}}}); err != nil {
		t.Fatal(err)
	}
	var logged []string
	r := &Reporter{GH: gh, Record: record, Close: true, Mask: func(s string) string { return s }, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
	r.Report(ctx, st)
	r.Report(ctx, st)
	if len(logged) > 0 {
		t.Fatalf("logged %v", logged)
	}
	issues := srv.Issues()
	if len(issues[0].Comments) != 1 || len(issues[1].Comments) != 1 || !issues[0].Closed || !issues[1].Closed {
		t.Fatalf("issues %+v", issues)
	}
	if !strings.Contains(issues[1].Comments[0], "commit c2") {
		t.Fatalf("comment %q", issues[1].Comments[0])
	}
	rec, err := LoadRecord(record)
	if err != nil || rec.Posts[k1].State != "posted" || rec.Posts[k2].State != "posted" {
		t.Fatalf("record %+v %v", rec, err)
	}
}

// A pull request's body counts an item marked by hand apart, never as
// passed, and says of a trusted mark that ralph did not verify it.
func TestPullRequestBodyCountsMarksApart(t *testing.T) {
	st := &engine.State{RunID: "r1", Order: []string{"S-1", "S-2", "S-3"}, Items: map[string]*engine.ItemState{
		"S-1": {ID: "S-1", Status: engine.ItemPassed, Commit: "0123456789abcdef"},
		"S-2": {ID: "S-2", Status: engine.ItemMarked, Reason: "passes: true in next.json, but no commit of ralph's on main records it"},
		"S-3": {ID: "S-3", Status: engine.ItemPassed, Reason: engine.TrustedReason},
	}}
	body := PullRequestBody(st, nil)
	for _, want := range []string{
		"2 of 3 items passed, 1 marked by hand (not verified).",
		"| S-2 | marked |  | no: marked by hand, not verified (passes: true in next.json, but no commit of ralph's on main records it) |",
		"| S-3 | passed |  | no: marked done by hand, counted as passed because the run trusts marks (--trust-marks) |",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
}
