package judge

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// newJudge is the judge of a new repository on main (no commit yet),
// its state in .ralph.
func newJudge(t *testing.T) (*Judge, string) {
	t.Helper()
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(k, "t")
	}
	for _, k := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(k, "t@example.com")
	}
	dir := t.TempDir()
	repo, err := git.Init(context.Background(), proc.Exec{}, dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	j, err := New(repo, gate.Runner{Proc: proc.Exec{}}, filepath.Join(dir, ".ralph"))
	if err != nil {
		t.Fatal(err)
	}
	return j, dir
}

// write writes files (path → content) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs git in dir.
func run(t *testing.T, j *Judge, args ...string) string {
	t.Helper()
	out, err := j.Repo.Run(context.Background(), args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// commitAll commits every file of the tree with msg and returns the commit.
func commitAll(t *testing.T, j *Judge, msg string) string {
	t.Helper()
	run(t, j, "add", "-A")
	run(t, j, "commit", "-qm", msg)
	return run(t, j, "rev-parse", "HEAD")
}

// treeFiles maps each file of tree to its content.
func treeFiles(t *testing.T, j *Judge, tree string) map[string]string {
	t.Helper()
	entries, err := j.Repo.TreeFiles(context.Background(), tree)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := j.Repo.Blob(context.Background(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[e.Path] = string(b)
	}
	return out
}

// The record step records the work tree as a tree — what the agent
// committed, staged or left unstaged, new files included — in an index of
// its own: the user's index is never touched. The user's files that were
// dirty before the run and the source's own files keep the base's
// version, whatever the agent committed or staged of them; what git
// ignores is not recorded. The tree takes its place in the lander's queue,
// with ralph's bookkeeping in it.
func TestRecordStepSnapshotsWithoutTouchingTheIndex(t *testing.T) {
	ctx := context.Background()
	j, dir := newJudge(t)
	write(t, dir, map[string]string{"a.txt": "a\n", "notes.txt": "the user's\n", "tasks.jsonl": "{}\n", ".gitignore": "*.log\n.ralph/\n", "prd.json": "{\"passes\": false}\n"})
	base := commitAll(t, j, "base")
	run(t, j, "checkout", "-qb", "task/x")
	l, err := j.Lander(ctx, "main", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The user's own dirty file, before the run.
	write(t, dir, map[string]string{"notes.txt": "the user's, edited\n"})
	// The agent: a commit that touches the task file too, a staged new
	// file, an unstaged edit, an untracked file, an ignored one.
	write(t, dir, map[string]string{"a.txt": "a\nfrom a commit\n", "tasks.jsonl": "{\"agent\": true}\n"})
	run(t, j, "add", "a.txt", "tasks.jsonl")
	run(t, j, "commit", "-qm", "the agent's commit")
	write(t, dir, map[string]string{"staged.txt": "staged\n", "tasks.jsonl": "{\"agent\": 2}\n"})
	run(t, j, "add", "staged.txt", "tasks.jsonl")
	write(t, dir, map[string]string{"a.txt": "a\nfrom a commit\nunstaged\n", "new/file.txt": "untracked\n", "build.log": "ignored\n"})
	index := filepath.Join(dir, ".git", "index")
	before, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	statusBefore := run(t, j, "status", "--porcelain")

	c := &Case{Item: "S-1", Dir: dir, Base: base, Preexisting: []string{"notes.txt"}, Lander: l,
		Claim: Claim{Target: "main", Own: "task/x", Exclude: []string{"tasks.jsonl"},
			Mark: func(parent func(string) []byte, onTip bool) (map[string][]byte, error) {
				if !onTip {
					t.Error("a tree built on the tip was marked as if it were not")
				}
				return map[string][]byte{"prd.json": bytes.Replace(parent("prd.json"), []byte("false"), []byte("true"), 1)}, nil
			}}}
	f := recordStep{}.Check(ctx, j, c)
	if f.Fail != nil {
		t.Fatalf("recording failed: %+v", f.Fail)
	}
	defer c.snap.Remove()
	if after, _ := os.ReadFile(index); !bytes.Equal(before, after) {
		t.Fatal("the user's index changed")
	}
	if got := run(t, j, "status", "--porcelain"); got != statusBefore {
		t.Fatalf("status changed:\n%s\nwas:\n%s", got, statusBefore)
	}
	want := map[string]string{
		"a.txt":        "a\nfrom a commit\nunstaged\n",
		"staged.txt":   "staged\n",
		"new/file.txt": "untracked\n",
		"notes.txt":    "the user's\n",
		"tasks.jsonl":  "{}\n",
		".gitignore":   "*.log\n.ralph/\n",
		"prd.json":     "{\"passes\": true}\n",
	}
	got := treeFiles(t, j, c.tree)
	if len(got) != len(want) {
		t.Errorf("recorded %q", got)
	}
	for p, s := range want {
		if got[p] != s {
			t.Errorf("%s recorded as %q, want %q", p, got[p], s)
		}
	}
	if c.tree != c.own || c.snap == nil || c.snap.Tree != c.tree || len(c.marked) != 1 || c.marked[0] != "prd.json" {
		t.Fatalf("tree %s own %s snap %+v marked %v", c.tree, c.own, c.snap, c.marked)
	}
	var changed []string
	for _, ch := range c.changes {
		changed = append(changed, string(ch.Status)+" "+ch.Path)
	}
	if strings.Join(changed, ", ") != "M a.txt, A new/file.txt, M prd.json, A staged.txt" {
		t.Fatalf("changes %q", changed)
	}
	if c.ticket == nil || c.ticket.Plan().Tree != c.tree || c.ticket.Plan().Base != base || c.ticket.Plan().On != nil {
		t.Fatalf("not queued on the tip: %+v", c.ticket)
	}
	// The snapshot's index is a file of its own, beside the user's.
	if fi, err := os.Stat(c.snap.Index); err != nil || c.snap.Index == index || fi.Size() == 0 {
		t.Fatalf("the snapshot's index %s: %v", c.snap.Index, err)
	}
	c.Lander.Withdraw(c.ticket)
}

// The refs check puts back a tag, a branch and a new tag the agent moved,
// deleted or made, each version of the agent's kept under
// refs/ralph/kept/<run>/<iteration>/; a replace ref is removed and fails
// the claim.
func TestRefsCheckRestoresAndKeeps(t *testing.T) {
	ctx := context.Background()
	j, dir := newJudge(t)
	write(t, dir, map[string]string{"a.txt": "a\n"})
	base := commitAll(t, j, "base")
	run(t, j, "tag", "v1")
	run(t, j, "branch", "old")
	before, err := j.Repo.Refs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The agent: a commit on a side branch, the tag moved to it, a tag of
	// its own, another branch deleted.
	run(t, j, "checkout", "-qb", "side")
	write(t, dir, map[string]string{"a.txt": "b\n"})
	agents := commitAll(t, j, "the agent's")
	run(t, j, "checkout", "-q", "main")
	run(t, j, "tag", "-f", "v1", agents)
	run(t, j, "tag", "v2", agents)
	run(t, j, "branch", "-D", "old")

	c := &Case{Item: "S-1", RunID: "r1", Iteration: 3, Dir: dir, RefsBefore: before}
	f := refsCheck{}.Check(ctx, j, c)
	if f.Fail != nil {
		t.Fatalf("moving a tag failed the claim: %+v", f.Fail)
	}
	refs, _ := j.Repo.Refs(ctx)
	for ref, want := range map[string]string{
		"refs/tags/v1":                    base,
		"refs/tags/v2":                    "",
		"refs/heads/old":                  base,
		"refs/ralph/kept/r1/3/tags/v1":    agents,
		"refs/ralph/kept/r1/3/tags/v2":    agents,
		"refs/heads/side":                 "", // a branch the agent made: put back (deleted), kept
		"refs/ralph/kept/r1/3/heads/side": agents,
	} {
		if refs[ref] != want {
			t.Errorf("%s is at %q, want %q", ref, refs[ref], want)
		}
	}
	said := strings.Join(f.Tampered, "\n")
	for _, want := range []string{
		"the agent moved tags/v1 from " + base[:8] + " to " + agents[:8] + "; put back, its version kept as refs/ralph/kept/r1/3/tags/v1",
		"the agent made tags/v2 (at " + agents[:8] + "); put back, its version kept as refs/ralph/kept/r1/3/tags/v2",
		"the agent deleted old (was " + base[:8] + "); put back",
	} {
		if !strings.Contains(said, want) {
			t.Errorf("tampering lacks %q:\n%s", want, said)
		}
	}

	// A replace ref fails the claim, and is removed.
	before, _ = j.Repo.Refs(ctx)
	run(t, j, "replace", base, agents)
	c = &Case{Item: "S-1", RunID: "r1", Iteration: 4, Dir: dir, RefsBefore: before}
	f = refsCheck{}.Check(ctx, j, c)
	if f.Fail == nil || f.Fail.Summary != "tampering: a replace ref" {
		t.Fatalf("a replace ref: %+v", f.Fail)
	}
	if refs, _ := j.Repo.Refs(ctx, "refs/replace/"); len(refs) != 0 {
		t.Fatalf("replace refs left: %v", refs)
	}
}
