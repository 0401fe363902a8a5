package cluster

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// A worker's gate results stand only for the tree they ran on, for the
// gates asked, once; anything else runs the gates here.
func TestAttestationsStandOnlyForTheirTree(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) string {
		c := exec.Command("git", append([]string{"-C", dir}, args...)...)
		c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	run("add", "-A")
	run("commit", "-qm", "one")
	head := run("rev-parse", "HEAD")
	ctx := context.Background()
	a := &Attestations{Repo: &git.Repo{Dir: dir, Runner: proc.Exec{}}}
	gates := []gate.Gate{{Name: "test", Command: "make test"}, {Name: "lint", Command: "make lint"}}
	passed := []gate.Result{{Name: "test", Command: "make test", Passed: true}, {Name: "lint", Command: "make lint", Passed: true}}
	lookup := func() (bool, bool) {
		_, ok, found := a.Lookup(ctx, dir, gates, io.Discard)
		return ok, found
	}
	a.Put(dir, head, "w1", "h", gates, passed, nil)
	if ok, found := lookup(); !found || !ok {
		t.Fatalf("the tree of the commit the gates ran on: found %v passed %v", found, ok)
	}
	if _, found := lookup(); found {
		t.Fatal("a report was used twice")
	}
	for name, put := range map[string]func(){
		"other gates":        func() { a.Put(dir, head, "w1", "h", gates[:1], passed[:1], nil) },
		"results for others": func() { a.Put(dir, head, "w1", "h", gates, []gate.Result{passed[1], passed[0]}, nil) },
		"stopped early":      func() { a.Put(dir, head, "w1", "h", gates, passed[:1], nil) },
		"another commit":     func() { a.Put(dir, strings.Repeat("0", 40), "w1", "h", gates, passed, nil) },
		"dropped":            func() { a.Put(dir, head, "w1", "h", gates, passed, nil); a.Drop(dir) },
	} {
		put()
		if _, found := lookup(); found {
			t.Errorf("%s: the report was used", name)
		}
	}
	// A tree changed since the gates ran (the coordinator restored a file,
	// say): run here — unless the change is in a path never committed.
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed\n"), 0o644)
	a.Put(dir, head, "w1", "h", gates, passed, nil)
	if _, found := lookup(); found {
		t.Error("a changed tree used the report")
	}
	a.Put(dir, head, "w1", "h", gates, passed, []string{"a.txt"})
	if _, found := lookup(); !found {
		t.Error("a change in a path never committed refused the report")
	}
	// A failing report stands too: the story goes back with its output.
	run("checkout", "-q", "--", "a.txt")
	failed := []gate.Result{{Name: "test", Command: "make test", Passed: false, Output: "FAIL x"}}
	a.Put(dir, head, "w1", "h", gates, failed, nil)
	if res, ok, found := a.Lookup(ctx, dir, gates, io.Discard); !found || ok || res[0].Output != "FAIL x" {
		t.Fatalf("a failing report: found %v passed %v %v", found, ok, res)
	}
}
