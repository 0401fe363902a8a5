package ghtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gh runs the real gh CLI against srv in dir.
func gh(t *testing.T, srv *Server, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("gh", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), srv.Env(filepath.Join(t.TempDir(), "gh"))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gh %s: %v\n%s\nrequests: %s", strings.Join(args, " "), err, out, srv.Operations())
	}
	return string(out)
}

func start(t *testing.T) (*Server, string) {
	t.Helper()
	if _, err := exec.LookPath("gh"); err != nil {
		t.Skip("gh is not installed (scripts/install-tools.sh installs it)")
	}
	srv, err := Start(t.TempDir(), "acme", "widgets")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "base"}, {"remote", "add", "origin", srv.RemoteURL()}} {
		c := exec.Command("git", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return srv, dir
}

func TestIssuesThroughRealGh(t *testing.T) {
	srv, dir := start(t)
	one := srv.AddIssue("First", "body one\n- [ ] works", "ralph")
	srv.AddIssue("Other", "not ours", "bug")
	out := gh(t, srv, dir, "issue", "list", "--search", "label:ralph", "--state", "open", "--json", "number,title,body,labels", "--limit", "100")
	var got []struct {
		Number int
		Title  string
		Labels []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != 1 || got[0].Number != one || got[0].Labels[0].Name != "ralph" {
		t.Fatalf("issue list: %s", out)
	}
	gh(t, srv, dir, "issue", "comment", "1", "--body", "done in abc")
	gh(t, srv, dir, "issue", "close", "1")
	is := srv.Issues()[0]
	if !is.Closed || len(is.Comments) != 1 || is.Comments[0] != "done in abc" {
		t.Fatalf("issue after comment and close: %+v", is)
	}
}

func TestPullRequestsThroughRealGh(t *testing.T) {
	srv, dir := start(t)
	out := gh(t, srv, dir, "pr", "create", "--head", "ralph/x", "--base", "main", "--title", "T", "--body", "B1", "--draft")
	if !strings.Contains(out, "/pull/1") {
		t.Fatalf("pr create: %s", out)
	}
	out = gh(t, srv, dir, "pr", "list", "--head", "ralph/x", "--state", "open", "--json", "number,isDraft,url")
	if !strings.Contains(out, `"number":1`) || !strings.Contains(out, `"isDraft":true`) {
		t.Fatalf("pr list: %s", out)
	}
	gh(t, srv, dir, "pr", "edit", "1", "--body", "B2")
	gh(t, srv, dir, "pr", "ready", "1")
	prs := srv.PRs()
	if len(prs) != 1 || prs[0].Body != "B2" || prs[0].Draft || prs[0].Head != "ralph/x" || prs[0].Base != "main" {
		t.Fatalf("pr after edit and ready: %+v", prs)
	}
	gh(t, srv, dir, "pr", "ready", "1", "--undo")
	if !srv.PRs()[0].Draft {
		t.Fatal("pr ready --undo left it ready")
	}
}
