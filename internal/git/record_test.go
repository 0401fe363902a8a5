package git

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// files maps every file under dir (but .git) to its content.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var g, w []string
	for p, s := range got {
		g = append(g, p+"="+s)
	}
	for p, s := range want {
		w = append(w, p+"="+s)
	}
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "|") != strings.Join(w, "|") {
		t.Fatalf("%s:\n got %q\nwant %q", what, g, w)
	}
}

// A judge's checkout holds exactly one commit: switching it to another
// writes only the files that differ (an unchanged file keeps its inode
// and mtime), removes the files the commit lacks and everything untracked
// or ignored but the folders it is told to keep, and recovers from a
// stale index.lock and a corrupt index (a git killed mid-write).
func TestCheckoutSwitch(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	write := func(files map[string]string) {
		t.Helper()
		for p, s := range files {
			full := filepath.Join(dir, p)
			os.MkdirAll(filepath.Dir(full), 0o755)
			if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(msg string) string {
		t.Helper()
		if err := r.AddAll(ctx); err != nil {
			t.Fatal(err)
		}
		sha, err := r.Commit(ctx, msg+"\n", false)
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	write(map[string]string{"a.txt": "a\n", "same.txt": "same\n", "dir/c.txt": "c\n", ".gitignore": "*.log\n"})
	c1 := commit("one")
	os.RemoveAll(filepath.Join(dir, "dir"))
	write(map[string]string{"a.txt": "A\n", "d.txt": "d\n"})
	c2 := commit("two")

	root := t.TempDir()
	co := &Checkout{Dir: filepath.Join(root, "0"), Index: filepath.Join(root, "0.index"), GitDir: filepath.Join(dir, ".git"), Runner: proc.Exec{}}
	keep := []string{"node_modules"}
	if err := co.Switch(ctx, c1, keep); err != nil {
		t.Fatal(err)
	}
	one := map[string]string{"a.txt": "a\n", "same.txt": "same\n", "dir/c.txt": "c\n", ".gitignore": "*.log\n"}
	sameFiles(t, "the first checkout", files(t, co.Dir), one)

	// What a gate leaves: an untracked file, an ignored one, a dependency
	// folder the judge gave it.
	os.WriteFile(filepath.Join(co.Dir, "junk.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(co.Dir, "gate.log"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(co.Dir, "node_modules", "pkg"), 0o755)
	os.WriteFile(filepath.Join(co.Dir, "node_modules", "pkg", "index.js"), []byte("dep"), 0o644)
	same := filepath.Join(co.Dir, "same.txt")
	before, _ := os.Stat(same)
	time.Sleep(20 * time.Millisecond) // a file written again would show a later mtime

	if err := co.Switch(ctx, c2, keep); err != nil {
		t.Fatal(err)
	}
	two := map[string]string{"a.txt": "A\n", "same.txt": "same\n", "d.txt": "d\n", ".gitignore": "*.log\n", "node_modules/pkg/index.js": "dep"}
	sameFiles(t, "switched to the second commit", files(t, co.Dir), two)
	after, _ := os.Stat(same)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("an unchanged file was written again: mtime %v, was %v", after.ModTime(), before.ModTime())
	}

	// A stale lock of a git that died: removed.
	os.WriteFile(co.Index+".lock", nil, 0o644)
	if err := co.Switch(ctx, c1, keep); err != nil {
		t.Fatalf("with a stale index.lock: %v", err)
	}
	one["node_modules/pkg/index.js"] = "dep"
	sameFiles(t, "back to the first commit", files(t, co.Dir), one)
	if _, err := os.Stat(co.Index + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("the stale lock is still there: %v", err)
	}

	// A corrupt index: the checkout starts over.
	os.WriteFile(co.Index, []byte("DIRC garbage"), 0o644)
	os.WriteFile(filepath.Join(co.Dir, "a.txt"), []byte("edited by a gate\n"), 0o644)
	if err := co.Switch(ctx, c2, nil); err != nil {
		t.Fatalf("with a corrupt index: %v", err)
	}
	delete(two, "node_modules/pkg/index.js") // kept no more
	sameFiles(t, "after a corrupt index", files(t, co.Dir), two)

	// A tree, not only a commit.
	tree, err := r.TreeOf(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Switch(ctx, tree, nil); err != nil {
		t.Fatal(err)
	}
	delete(one, "node_modules/pkg/index.js")
	sameFiles(t, "a tree", files(t, co.Dir), one)

	if err := co.Switch(ctx, "0123456789012345678901234567890123456789", nil); err == nil || !strings.Contains(err.Error(), "checking out 01234567 for the judge") {
		t.Fatalf("a commit that does not exist: %v", err)
	}
}

// Changes lists what differs between two trees with modes, blobs and
// line counts (-1 for a binary file), whatever the paths hold.
func TestChanges(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, p), mode)
	}
	commit := func() string {
		t.Helper()
		r.AddAll(ctx)
		sha, err := r.Commit(ctx, "c\n", false)
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	write("a.txt", "1\n2\n3\n", 0o644)
	write("gone.txt", "x\ny\n", 0o644)
	write("run.sh", "echo\n", 0o644)
	write("link", "a file\n", 0o644)
	a := commit()
	write("a.txt", "1\nTWO\n3\n4\n", 0o644)
	os.Remove(filepath.Join(dir, "gone.txt"))
	write("run.sh", "echo\n", 0o755)
	write("bin.dat", "\x00\x01\x02", 0o644)
	write("odd\tname\n.txt", "odd\n", 0o644)
	os.Remove(filepath.Join(dir, "link"))
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	b := commit()
	changes, err := r.Changes(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, strings.Join([]string{string(c.Status), c.Path, c.OldMode, c.NewMode, strconv.Itoa(c.Added), strconv.Itoa(c.Deleted)}, " "))
		if c.Status != 'D' && len(c.NewBlob) != 40 || c.Status != 'A' && len(c.OldBlob) != 40 {
			t.Errorf("%s: blobs %q %q", c.Path, c.OldBlob, c.NewBlob)
		}
	}
	want := []string{
		"M a.txt 100644 100644 2 1",
		"A bin.dat 000000 100644 -1 -1",
		"D gone.txt 100644 000000 0 2",
		"T link 100644 120000 1 1",
		"A odd\tname\n.txt 000000 100644 1 0",
		"M run.sh 100644 100755 0 0",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("changes:\n got %q\nwant %q", got, want)
	}
	if none, err := r.Changes(ctx, b, b); err != nil || len(none) != 0 {
		t.Fatalf("no changes: %v %v", none, err)
	}
}

// parseRawNumstat pairs the raw records with the numstat ones in order;
// a short or broken record is skipped, not misread.
func TestParseRawNumstat(t *testing.T) {
	out := ":100644 100644 aaa bbb M\x00a b.txt\x00" +
		":000000 160000 000 ccc A\x00sub\x00" +
		":100644 100644 ddd\x00short.txt\x00" +
		"3\t1\ta b.txt\x00" +
		"-\t-\tsub\x00" +
		"bad\x00"
	got := parseRawNumstat(out)
	if len(got) != 2 {
		t.Fatalf("%+v", got)
	}
	if c := got[0]; c.Path != "a b.txt" || c.Status != 'M' || c.OldBlob != "aaa" || c.NewBlob != "bbb" || c.Added != 3 || c.Deleted != 1 {
		t.Errorf("first %+v", c)
	}
	if c := got[1]; c.Path != "sub" || c.NewMode != Gitlink || c.Added != -1 || c.Deleted != -1 {
		t.Errorf("second %+v", c)
	}
	if got := parseRawNumstat(""); len(got) != 0 {
		t.Errorf("empty output: %+v", got)
	}
}

// committedRepo is newTestRepo with one commit on main (returned).
func committedRepo(t *testing.T) (*Repo, string, string) {
	t.Helper()
	r, dir := newTestRepo(t)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.AddAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	sha, err := r.Commit(context.Background(), "init\n", false)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, sha
}

// GitPaths names each file of a work tree's own git folder in one call:
// a linked worktree's index and MERGE_HEAD are in its admin folder, not
// the main one's.
func TestGitPaths(t *testing.T) {
	ctx := context.Background()
	r, dir, _ := committedRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	if err := r.WorktreeAdd(ctx, wt, "side", "main"); err != nil {
		t.Fatal(err)
	}
	real := func(p string) string {
		t.Helper()
		q, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(q, filepath.Base(p))
	}
	for _, c := range []struct {
		repo   *Repo
		gitDir string
	}{{r, filepath.Join(dir, ".git")}, {r.At(wt), filepath.Join(dir, ".git", "worktrees", "wt")}} {
		paths, err := c.repo.GitPaths(ctx, "index", "MERGE_HEAD")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{filepath.Join(c.gitDir, "index"), filepath.Join(c.gitDir, "MERGE_HEAD")}
		if len(paths) != 2 || real(paths[0]) != real(want[0]) || real(paths[1]) != real(want[1]) {
			t.Errorf("GitPaths in %s = %q, want %q", c.repo.Dir, paths, want)
		}
	}
}

// RefsAndHead names the branch HEAD is on with the refs, in the tree it
// runs in (a worktree's own HEAD), and none when HEAD is detached.
func TestRefsAndHead(t *testing.T) {
	ctx := context.Background()
	r, _, sha := committedRepo(t)
	for _, b := range []string{"a-first", "zz-last"} {
		if err := r.CreateBranch(ctx, b, ""); err != nil {
			t.Fatal(err)
		}
	}
	wt := filepath.Join(t.TempDir(), "wt")
	if err := r.WorktreeAdd(ctx, wt, "side", "main"); err != nil {
		t.Fatal(err)
	}
	check := func(repo *Repo, wantHead string) {
		t.Helper()
		refs, head, err := repo.RefsAndHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if head != wantHead {
			t.Errorf("head in %s = %q, want %q", repo.Dir, head, wantHead)
		}
		for _, ref := range []string{"refs/heads/a-first", "refs/heads/main", "refs/heads/side", "refs/heads/zz-last"} {
			if refs[ref] != sha {
				t.Errorf("refs[%s] = %q, want %s (all: %v)", ref, refs[ref], sha, refs)
			}
		}
		if len(refs) != 4 {
			t.Errorf("refs = %v, want 4", refs)
		}
	}
	check(r, "refs/heads/main")
	check(r.At(wt), "refs/heads/side")
	if err := r.Checkout(ctx, "zz-last"); err != nil {
		t.Fatal(err)
	}
	check(r, "refs/heads/zz-last")
	if _, err := r.Run(ctx, "checkout", "-q", "--detach"); err != nil {
		t.Fatal(err)
	}
	check(r, "")
	plain, err := r.Refs(ctx, "refs/heads/")
	if err != nil || len(plain) != 4 || plain["refs/heads/a-first"] != sha {
		t.Errorf("Refs = %v, %v", plain, err)
	}
}
