package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
)

const twoStories = `{"project": "t", "branch_name": "ralph/t", "user_stories": [
  {"id": "S-1", "title": "one", "priority": 1, "checks": ["test -f one.txt"]},
  {"id": "S-2", "title": "two", "priority": 2, "checks": ["test -f two.txt"]}
], "quality_checks": {"test": "test -f README"}}
`

const script = `items:
  S-1:
    - write: {one.txt: "1\n"}
      message: "<promise>COMPLETE</promise>"
  S-2:
    - write: {two.txt: "2\n"}
      message: "<promise>COMPLETE</promise>"
`

func newRepo(t *testing.T) (string, *git.Repo) {
	t.Helper()
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")
	dir := t.TempDir()
	ctx := context.Background()
	repo, err := git.Init(ctx, proc.Exec{}, dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "prd.json"), []byte(twoStories), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("x\n"), 0o644)
	if err := repo.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit(ctx, "init\n", false); err != nil {
		t.Fatal(err)
	}
	return dir, repo
}

func runOnce(t *testing.T, dir string, repo *git.Repo) engine.Outcome {
	t.Helper()
	gates := gate.Runner{Proc: proc.Exec{}}
	src, err := OpenPRD(filepath.Join(dir, "prd.json"), repo, gates)
	if err != nil {
		t.Fatal(err)
	}
	sp := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sp, []byte(script), 0o644)
	ag, err := agent.New("scripted", agent.Options{Script: sp})
	if err != nil {
		t.Fatal(err)
	}
	p := engine.PathsFor(dir)
	j, err := judge.New(repo, gates, p.Dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Paths: p, Source: src, Git: repo, Judge: j, Agent: engine.AgentConfig{Default: ag, Name: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A crash after the story's commit landed but before the state said so:
// the rerun finds the Ralph-Story trailer and does not commit again.
func TestRecoverAfterCrashInCommitPhase(t *testing.T) {
	dir, repo := newRepo(t)
	ctx := context.Background()
	out := runOnce(t, dir, repo)
	if out.Status != engine.StatusComplete {
		t.Fatalf("first run: %s %s", out.Status, out.Reason)
	}
	// Rewind the state to "S-2 was committing when the process died".
	p := engine.PathsFor(dir)
	st, _ := engine.LoadState(p.State)
	head, _ := repo.Head(ctx)
	parent, _ := repo.RevParse(ctx, "HEAD~1")
	s2 := st.Items["S-2"]
	s2.Status, s2.Commit, s2.PassedAt, s2.BaseHead = engine.ItemRunning, "", nil, parent
	st.Current = []*engine.Current{{Item: "S-2", Iteration: 2, Attempt: 1, Phase: engine.PhaseCommit, BaseHead: parent}}
	st.Status = engine.StatusRunning
	if err := store.WriteJSON(p.State, st); err != nil {
		t.Fatal(err)
	}
	out = runOnce(t, dir, repo)
	if out.Status != engine.StatusComplete || out.State.Items["S-2"].Commit != head {
		t.Fatalf("rerun: %s %+v", out.Status, out.State.Items["S-2"])
	}
	log, _ := repo.Log(ctx, "main..ralph/t", "%s")
	if strings.Join(log, "|") != "feat(S-2): two|feat(S-1): one" {
		t.Fatalf("history %q", log)
	}
}

// A crash in the commit phase before the commit: the rerun verifies again
// and commits exactly once.
func TestRecoverBeforeCommitLanded(t *testing.T) {
	dir, repo := newRepo(t)
	ctx := context.Background()
	runOnce(t, dir, repo)
	p := engine.PathsFor(dir)
	st, _ := engine.LoadState(p.State)
	// Undo S-2's commit but keep its work in the tree, as if the process
	// died between the gates and `git commit`.
	if err := repo.ResetSoft(ctx, "HEAD~1"); err != nil {
		t.Fatal(err)
	}
	parent, _ := repo.Head(ctx)
	s2 := st.Items["S-2"]
	s2.Status, s2.Commit, s2.PassedAt, s2.BaseHead = engine.ItemRunning, "", nil, parent
	st.Current = []*engine.Current{{Item: "S-2", Iteration: 2, Attempt: 1, Phase: engine.PhaseCommit, BaseHead: parent, Final: "<promise>COMPLETE</promise>"}}
	st.Status = engine.StatusRunning
	store.WriteJSON(p.State, st)
	out := runOnce(t, dir, repo)
	if out.Status != engine.StatusComplete {
		t.Fatalf("rerun: %s %s", out.Status, out.Reason)
	}
	log, _ := repo.Log(ctx, "main..ralph/t", "%s")
	if strings.Join(log, "|") != "feat(S-2): two|feat(S-1): one" {
		t.Fatalf("history %q", log)
	}
}

// The PRD's items change only with its Doc (a steering's PRD adopted), so
// the version moves on exactly then.
func TestPRDItemsVersionMovesWithTheDoc(t *testing.T) {
	dir, repo := newRepo(t)
	src, err := OpenPRD(filepath.Join(dir, "prd.json"), repo, gate.Runner{Proc: proc.Exec{}})
	if err != nil {
		t.Fatal(err)
	}
	v := src.ItemsVersion()
	if err := src.setPassed("S-1", true); err != nil {
		t.Fatal(err)
	}
	if src.ItemsVersion() != v {
		t.Fatal("the version moved though only a verdict changed")
	}
	src.mu.Lock()
	disk, err := prd.Parse(src.File, []byte(twoStories))
	if err != nil {
		t.Fatal(err)
	}
	src.Doc = disk
	src.mu.Unlock()
	if src.ItemsVersion() == v {
		t.Fatal("the version stayed when the Doc was replaced")
	}
}
