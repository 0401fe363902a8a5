package source

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/tasks"
)

const taskTree = `{"id":"A","title":"auth","status":"pending","leaf":false}
{"id":"A.1","title":"session: store/../x","status":"pending","leaf":true}
{"id":"B","title":"docs","status":"pending","leaf":true}
`

func newTaskRepo(t *testing.T) (string, *git.Repo, *Tasks) {
	t.Helper()
	dir, repo := newRepo(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(dir, "tasks.jsonl"), []byte(taskTree), 0o644)
	repo.AddAll(ctx)
	if _, err := repo.Commit(ctx, "tasks\n", false); err != nil {
		t.Fatal(err)
	}
	// "ok" passes at the base; "one" fails there: a task that makes it
	// pass has evidence.
	src, err := OpenTasks(ctx, filepath.Join(dir, "tasks.jsonl"), repo, dir, gate.Runner{Proc: proc.Exec{}},
		[]gate.Gate{{Name: "ok", Command: "test ! -f bad.txt"}, {Name: "one", Command: "test -f one.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(nil) }) // its watch of the task files
	return dir, repo, src
}

func newState() *engine.State {
	return &engine.State{RunID: "r1", Items: map[string]*engine.ItemState{}}
}

// agentClaims marks id complete the way `ralph task complete` does inside
// an iteration (the loop holds the task, so it is not archived yet).
func agentClaims(t *testing.T, src *Tasks, id string) {
	t.Helper()
	err := src.Store.Update(func(set *tasks.Set) error {
		tk, _ := set.Get(id)
		tk.Status = tasks.StatusComplete
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func gitOut(t *testing.T, repo *git.Repo, args ...string) string {
	t.Helper()
	out, err := repo.Run(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTasksSourceCompleteFlow(t *testing.T) {
	ctx := context.Background()
	dir, repo, src := newTaskRepo(t)
	st := newState()
	// Sparse: no task has a record yet; both leaves are counted.
	if got, n := src.Items(), src.Untracked(); len(got) != 0 || n != 2 {
		t.Fatalf("items %+v, untracked %d", got, n)
	}
	it, err := src.Next(st, nil)
	if err != nil || it == nil || it.ID != "A.1" {
		t.Fatal(it, err)
	}
	if got, n := src.Items(), src.Untracked(); len(got) != 1 || got[0].ID != "A.1" || n != 1 {
		t.Fatalf("after Next: items %+v, untracked %d", got, n)
	}
	if !strings.Contains(it.Description, "ralph task complete A.1") || !strings.Contains(it.Description, "Part of: A auth") {
		t.Fatalf("description: %s", it.Description)
	}
	g := newJudging(t, repo, src, st)
	ws := g.prepare(it)
	if ws.Dir != dir || ws.Isolated || ws.Follow == nil {
		t.Fatal(ws)
	}
	branch := gitOut(t, repo, "branch", "--show-current")
	if it.Branch != branch {
		t.Fatalf("the item names branch %q, the tree is on %q", it.Branch, branch)
	}
	if branch != "task/A.1-session-store-x" {
		t.Fatalf("branch %q", branch)
	}
	if terms := src.Terms(it, st); terms.Target != "main" || terms.Own != branch || len(terms.Exclude) == 0 {
		t.Fatalf("terms %+v", terms)
	}
	if tk, _ := src.Store.Load(); tk != nil {
		if a1, _ := tk.Get("A.1"); a1.Status != tasks.StatusActive {
			t.Fatalf("not claimed: %s", a1.Status)
		}
	}
	// the agent works: a commit, an uncommitted file, a claim
	os.WriteFile(filepath.Join(dir, "one.txt"), []byte("1\n"), 0o644)
	gitOut(t, repo, "add", "-A") // includes the claimed tasks.jsonl
	gitOut(t, repo, "commit", "-qm", "step one")
	os.WriteFile(filepath.Join(dir, "two.txt"), []byte("2\n"), 0o644)
	agentClaims(t, src, "A.1")

	a := &engine.Attempt{Item: it, Dir: dir, Learnings: []string{"keep it small"}}
	v, sha := g.judge(a)
	if !v.Passed || !v.Claimed || sha == "" {
		t.Fatalf("verdict %+v", v)
	}
	if gitOut(t, repo, "branch", "--show-current") != "main" || repo.BranchExists(ctx, branch) {
		t.Fatal("not back on main or branch kept")
	}
	if head := gitOut(t, repo, "rev-parse", "HEAD"); head != sha {
		t.Fatalf("main's HEAD %s, landed %s", head, sha)
	}
	msg := gitOut(t, repo, "log", "-1", "--format=%B")
	for _, want := range []string{"[A.1] session: store/../x\n\n- step one\n- keep it small\n- Verified by ralph: ", "one failed at the base and passes", "Completes: A.1\nRalph-Task: A.1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	files := gitOut(t, repo, "show", "--name-only", "--format=", "HEAD")
	if files != "one.txt\ntwo.txt" {
		t.Errorf("the task's commit holds %q", files)
	}
	if gitOut(t, repo, "rev-list", "--count", "main") != "3" {
		t.Error("the task's work is not one commit on main")
	}
	// The main tree followed onto main: its index is the commit's, and
	// only the task files (the loop's, never a task's work) differ.
	if dirty := gitOut(t, repo, "status", "--porcelain", "--untracked-files=no"); dirty != " M tasks.jsonl" {
		t.Errorf("status after the landing:\n%s", dirty)
	}
	set, err := src.Store.Load()
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := set.Get("A.1")
	pa, _ := set.Get("A")
	if !a1.Archived() || a1.Commit != sha || !pa.Archived() {
		t.Fatalf("archive: %+v %+v", a1, pa)
	}
	if len(src.Store.Held()) != 0 {
		t.Fatal("hold left behind")
	}
	// the working copy of tasks.jsonl is the harness's, not HEAD's
	b, _ := os.ReadFile(src.File)
	if strings.Contains(string(b), `"A.1"`) {
		t.Fatalf("tasks.jsonl still has A.1:\n%s", b)
	}
}

func TestTasksSourceRejectsInvalidChangesAndGateFailure(t *testing.T) {
	ctx := context.Background()
	dir, repo, src := newTaskRepo(t)
	st := newState()
	it, _ := src.Next(st, nil)
	g := newJudging(t, repo, src, st)
	g.prepare(it)
	before, _ := os.ReadFile(src.File)
	// an agent deletes B by hand: rejected, file restored
	os.WriteFile(src.File, []byte(strings.Replace(string(before), `{"id":"B","title":"docs","status":"pending","leaf":true}`+"\n", "", 1)), 0o644)
	v, _ := g.judge(&engine.Attempt{Item: it, Dir: dir})
	if v.Passed || !strings.Contains(v.Failure, "deleted without being completed") || len(v.Tampered) == 0 {
		t.Fatalf("verdict %+v", v)
	}
	if after, _ := os.ReadFile(src.File); string(after) != string(before) {
		t.Fatalf("not restored:\n%s", after)
	}
	// a claim whose gate fails is turned back into active
	os.WriteFile(filepath.Join(dir, "bad.txt"), []byte("x"), 0o644)
	agentClaims(t, src, "A.1")
	g.prepare(it)
	v, _ = g.judge(&engine.Attempt{Item: it, Dir: dir})
	if v.Passed || !v.Claimed || !strings.Contains(v.Summary, "ok FAILED") {
		t.Fatalf("verdict %+v", v)
	}
	set, _ := src.Store.Load()
	if a1, _ := set.Get("A.1"); a1.Status != tasks.StatusActive {
		t.Fatalf("claim not reverted: %s", a1.Status)
	}
	// blocked after its attempts: work kept on the branch, main untouched
	mainHead := gitOut(t, repo, "rev-parse", "main")
	if err := src.Block(ctx, it, st, "failed 3 attempts"); err != nil {
		t.Fatal(err)
	}
	if gitOut(t, repo, "branch", "--show-current") != "main" || gitOut(t, repo, "rev-parse", "main") != mainHead {
		t.Fatal("main moved or not checked out")
	}
	if got := gitOut(t, repo, "log", "-1", "--format=%s", "task/A.1-session-store-x"); got != "wip(A.1): unfinished work (blocked)" {
		t.Fatalf("branch tip %q", got)
	}
	set, _ = src.Store.Load()
	if a1, _ := set.Get("A.1"); a1.Status != tasks.StatusBlocked || a1.Reason != "failed 3 attempts" {
		t.Fatalf("not blocked: %+v", a1)
	}
	if next, _ := src.Next(st, nil); next == nil || next.ID != "B" {
		t.Fatalf("next after block: %+v", next)
	}
}

func TestTasksSourceSplit(t *testing.T) {
	ctx := context.Background()
	dir, repo, src := newTaskRepo(t)
	st := newState()
	it, _ := src.Next(st, nil)
	g := newJudging(t, repo, src, st)
	g.prepare(it)
	if err := src.Store.Update(func(set *tasks.Set) error {
		_, err := set.Split("A.1", []string{"one", "two"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	v, sha := g.judge(&engine.Attempt{Item: it, Dir: dir})
	if !v.Passed || v.Summary != "split into A.1.1, A.1.2" || sha != "" {
		t.Fatalf("verdict %+v, landed %q", v, sha) // no work on the branch: nothing lands
	}
	if repo.BranchExists(ctx, "task/A.1-session-store-x") || gitOut(t, repo, "branch", "--show-current") != "main" {
		t.Fatal("branch of an empty split kept")
	}
	next, _ := src.Next(st, nil)
	if next == nil || next.ID != "A.1.1" {
		t.Fatalf("next %+v", next)
	}
}

func TestTasksSourceRecover(t *testing.T) {
	ctx := context.Background()
	dir, repo, src := newTaskRepo(t)
	st := newState()
	it, _ := src.Next(st, nil)
	g := newJudging(t, repo, src, st)
	g.prepare(it)
	os.WriteFile(filepath.Join(dir, "one.txt"), []byte("1\n"), 0o644)
	gitOut(t, repo, "add", "one.txt")
	gitOut(t, repo, "commit", "-qm", "one")
	agentClaims(t, src, "A.1")
	// A crash during a checkout with the task files aside: the next
	// process puts them back before anything reads them.
	if _, err := src.aside(); err != nil {
		t.Fatal(err)
	}
	src.cleanControl(ctx)
	src2, err := OpenTasks(ctx, src.File, repo, dir, src.Gates, src.GateList)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close(nil)
	if set, _ := src2.Store.Load(); set != nil {
		if a1, _ := set.Get("A.1"); a1.Status != tasks.StatusComplete {
			t.Fatalf("aside files not restored: %s", a1.Status)
		}
	}
	// Nothing landed: not recovered, judged again.
	if _, done, err := src2.Recover(ctx, it, st); err != nil || done {
		t.Fatal(done, err)
	}
	g2 := newJudging(t, repo, src2, st)
	g2.quiet = true // the process dies right after the landing
	g2.prepare(it)
	v, sha := g2.judge(&engine.Attempt{Item: it, Dir: dir})
	if !v.Passed || sha == "" {
		t.Fatal(v)
	}
	// A crash after the landing: Recover finds the trailer, archives the
	// task with the commit, deletes its branch and puts the tree on main.
	src3, _ := OpenTasks(ctx, src.File, repo, dir, src.Gates, src.GateList)
	defer src3.Close(nil)
	got, done, err := src3.Recover(ctx, it, st)
	if err != nil || !done || got != sha {
		t.Fatal(got, done, err)
	}
	if n := gitOut(t, repo, "rev-list", "--count", "main"); n != "3" {
		t.Fatalf("%s commits on main", n)
	}
	set, _ := src3.Store.Load()
	if a1, _ := set.Get("A.1"); !a1.Archived() || a1.Commit != sha {
		t.Fatalf("not archived with its commit: %+v", a1)
	}
	if gitOut(t, repo, "branch", "--show-current") != "main" || repo.BranchExists(ctx, "task/A.1-session-store-x") {
		t.Fatal("not back on main, or the task's branch kept")
	}
}

func TestTasksBranchNameSafe(t *testing.T) {
	_, repo, src := newTaskRepo(t)
	for _, title := range []string{"weird ~^:?*[ title\\ @{x}", "..", "ends.lock", "ünïcödé", strings.Repeat("long ", 40)} {
		b, err := src.branch(context.Background(), &engine.Item{ID: "A.1", Title: title})
		if err != nil {
			t.Fatalf("%q: %v", title, err)
		}
		if err := repo.CheckRefName(context.Background(), b); err != nil || !strings.HasPrefix(b, "task/A.1-") {
			t.Fatalf("%q → %q: %v", title, b, err)
		}
	}
}

// The task files set aside during a checkout are raw copies beside a small
// marker: a crash after the copies and before the marker leaves copies
// that mean nothing (removed, the files as they are kept), and a marker of
// an older version with the bytes inline still restores.
func TestTasksAsideMarkerAndCopies(t *testing.T) {
	ctx := context.Background()
	dir, repo, src := newTaskRepo(t)
	orig, err := os.ReadFile(src.File)
	if err != nil {
		t.Fatal(err)
	}
	aside := src.asidePath()
	os.MkdirAll(filepath.Dir(aside), 0o755)

	// copies without a marker
	os.WriteFile(aside+".active", []byte("not what the file holds\n"), 0o600)
	if s, err := OpenTasks(ctx, src.File, repo, dir, src.Gates, src.GateList); err != nil {
		t.Fatal(err)
	} else {
		s.Close(nil)
	}
	if b, _ := os.ReadFile(src.File); string(b) != string(orig) {
		t.Fatalf("tasks file changed by a copy without its marker:\n%s", b)
	}
	if _, err := os.Stat(aside + ".active"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("copy without a marker kept: %v", err)
	}

	// an older marker with the bytes inline
	old := fileSnap{Active: orig, HasActive: true, ActivePath: src.File, DonePath: src.Store.DonePath}
	b, _ := json.Marshal(old)
	os.WriteFile(aside, b, 0o600)
	os.WriteFile(src.File, []byte("{\"id\":\"Z\",\"title\":\"other branch\",\"status\":\"pending\",\"leaf\":true}\n"), 0o644)
	if s, err := OpenTasks(ctx, src.File, repo, dir, src.Gates, src.GateList); err != nil {
		t.Fatal(err)
	} else {
		s.Close(nil)
	}
	if b, _ := os.ReadFile(src.File); string(b) != string(orig) {
		t.Fatalf("older marker not restored:\n%s", b)
	}

	// a marker naming a copy that is gone is an error, not a silent loss
	os.WriteFile(aside, []byte(`{"has_active":true,"active_path":"`+src.File+`"}`), 0o600)
	if _, err := OpenTasks(ctx, src.File, repo, dir, src.Gates, src.GateList); err == nil || !strings.Contains(err.Error(), "set aside") {
		t.Fatalf("missing copy: %v", err)
	}
}

// The run's view of the task files is parsed again only when a file
// changed: a rewrite (renamed in, the same size) and an append to the
// archive are both seen; nothing changed keeps the view as it was.
func TestTasksReloadOnlyWhenTheFilesChanged(t *testing.T) {
	_, _, src := newTaskRepo(t)
	first := src.set
	if err := src.reload(); err != nil || src.set != first {
		t.Fatalf("unchanged files read again (err %v)", err)
	}
	err := src.Store.Update(func(set *tasks.Set) error {
		tk, _ := set.Get("B")
		tk.Title = "DOCS"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.reload(); err != nil {
		t.Fatal(err)
	}
	if tk, _ := src.set.Get("B"); tk.Title != "DOCS" {
		t.Fatalf("the rewritten title is %q", tk.Title)
	}
	f, err := os.OpenFile(src.Store.DonePath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"C","title":"old","status":"complete","leaf":true,"completed":"2026-01-02T03:04:05Z","commit":"0123456789abcdef0123456789abcdef01234567"}` + "\n")
	f.Close()
	if err := src.reload(); err != nil {
		t.Fatal(err)
	}
	if tk, ok := src.set.Get("C"); !ok || !tk.Archived() {
		t.Fatal("the task appended to the archive is not seen")
	}
}
