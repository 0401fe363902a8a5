package git

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralph-loop/ralph/internal/proc"
)

func TestSlugIsRefSafe(t *testing.T) {
	ctx := context.Background()
	r := &Repo{Dir: t.TempDir(), Runner: proc.Exec{}}
	for _, title := range []string{"Add login endpoint", "fix: ../../etc/passwd", "a..b~^:?*[\\ @{x}", "ÜNICODE ✓ tåsk", "", "-leading.dots.", strings.Repeat("long ", 40)} {
		slug := Slug(title, 40)
		if err := r.CheckRefName(ctx, "task/A.1-"+slug); err != nil {
			t.Errorf("Slug(%q) = %q: %v", title, slug, err)
		}
		if len(slug) > 40 {
			t.Errorf("Slug(%q) too long: %q", title, slug)
		}
	}
}

// The fake runner pins the exact argv: no shell, data only as arguments.
// Commit reads the new SHA from git's summary line and asks rev-parse only
// when that line is not there.
func TestArgvShape(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	msg := func(c proc.Cmd) {
		b, err := io.ReadAll(c.Stdin)
		if err != nil || string(b) != "feat: $(whoami)\n" {
			t.Errorf("message on stdin: %q", b)
		}
	}
	commit := []string{"git", "-c", "maintenance.auto=false", "-C", "/r", "-c", "core.abbrev=no", "commit", "--no-verify", "-F", "-"}
	f := proc.NewFakeRunner(t,
		proc.Expectation{Argv: []string{"git", "-c", "maintenance.auto=false", "-C", "/r", "branch", "--", "task/x; rm -rf /", "main"}},
		proc.Expectation{Argv: commit, Check: msg, Stdout: "[task/x (root-commit) " + sha + "] feat: [x] $(whoami)\n 1 file changed\n"},
		proc.Expectation{Argv: commit, Check: msg, Stdout: "something else\n"},
		proc.Expectation{Argv: []string{"git", "-c", "maintenance.auto=false", "-C", "/r", "rev-parse", "HEAD"}, Stdout: "abc\n"},
	)
	r := &Repo{Dir: "/r", Runner: f, BatchMaintenance: true}
	ctx := context.Background()
	if err := r.CreateBranch(ctx, "task/x; rm -rf /", "main"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Commit(ctx, "feat: $(whoami)\n", false); err != nil || got != sha {
		t.Fatal(got, err)
	}
	if got, err := r.Commit(ctx, "feat: $(whoami)\n", false); err != nil || got != "abc" {
		t.Fatal(got, err)
	}
}

func TestSummarySHA(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for out, want := range map[string]string{
		"[main " + sha + "] subject\n":                      sha,
		"[main (root-commit) " + sha + "] a ] b " + sha[:7]: sha,
		"[detached HEAD " + sha + "] x":                     sha,
		"[main 0123456] short":                              "",
		"nothing to commit":                                 "",
		"[main] " + sha:                                     "",
	} {
		if got := summarySHA(out); got != want {
			t.Errorf("summarySHA(%q) = %q, want %q", out, got, want)
		}
	}
}

// With real git: the commit's SHA is HEAD's; --include adds the tracked
// PRD on top of what is staged (and Tracked tells which paths it can
// take); add --verbose reports the paths it staged.
func TestCommitIncludeAndAddedFiles(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	r.BatchMaintenance = true
	write := func(name, s string) { os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644) }
	write("prd.json", "{}\n")
	write("odd 'name'.txt", "x\n")
	files, err := r.AddAllExcept(ctx, nil)
	if err != nil || strings.Join(files, "|") != "odd 'name'.txt|prd.json" {
		t.Fatalf("AddAllExcept = %q, %v", files, err)
	}
	sha, err := r.Commit(ctx, "init\n", false)
	if head, _ := r.Head(ctx); err != nil || sha != head {
		t.Fatalf("Commit = %q, %v; HEAD %q", sha, err, head)
	}
	write("prd.json", "{\"passes\": true}\n")
	write("work.txt", "w\n")
	write("ignored-by-include.txt", "i\n")
	if err := r.AddPaths(ctx, "work.txt"); err != nil {
		t.Fatal(err)
	}
	sha, err = r.CommitInclude(ctx, "story\n", false, filepath.Join(dir, "prd.json"))
	if head, _ := r.Head(ctx); err != nil || sha != head {
		t.Fatalf("CommitInclude = %q, %v; HEAD %q", sha, err, head)
	}
	if got, _ := r.Run(ctx, "show", "--name-only", "--format=", "HEAD"); got != "prd.json\nwork.txt" {
		t.Fatalf("committed %q", got)
	}
	write("new-prd.json", "{}\n")
	if !r.Tracked(ctx, filepath.Join(dir, "prd.json")) || r.Tracked(ctx, filepath.Join(dir, "new-prd.json")) {
		t.Fatal("Tracked is wrong")
	}
	write("work.txt", "changed\n")
	os.Remove(filepath.Join(dir, "odd 'name'.txt"))
	files, err = r.AddAllExcept(ctx, []string{"ignored-by-include.txt"})
	if err != nil || strings.Join(files, "|") != "odd 'name'.txt|work.txt|new-prd.json" {
		t.Fatalf("AddAllExcept = %q, %v", files, err)
	}
}

// newTestRepo is a fresh repository on main with a fixed identity.
func newTestRepo(t *testing.T) (*Repo, string) {
	t.Helper()
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")
	dir := t.TempDir()
	r, err := Init(context.Background(), proc.Exec{}, dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	return r, dir
}

func TestMergeSquashConflictAndTrailers(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	write := func(s string) { os.WriteFile(filepath.Join(dir, "f.txt"), []byte(s), 0o644) }
	write("base\n")
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "init\n", false); err != nil {
		t.Fatal(err)
	}
	r.CreateBranch(ctx, "side", "")
	write("main\n")
	r.AddAll(ctx)
	main, _ := r.Commit(ctx, "main change\n\nRalph-Story: US-1\nRalph-Run: r1\n", false)
	r.Checkout(ctx, "side")
	write("side\n")
	r.AddAll(ctx)
	r.Commit(ctx, "side change\n", false)
	r.Checkout(ctx, "main")
	err := r.MergeSquash(ctx, "side")
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Paths) != 1 || ce.Paths[0] != "f.txt" {
		t.Fatalf("want a conflict in f.txt, got %v", err)
	}
	if err := r.ResetHard(ctx, "HEAD"); err != nil {
		t.Fatal(err)
	}
	if got := r.FindTrailer(ctx, "main", 10, "Ralph-Story", "US-1", "Ralph-Run", "r1"); got != main {
		t.Fatalf("FindTrailer = %q, want %q", got, main)
	}
	if got := r.FindTrailer(ctx, "main", 10, "Ralph-Story", "US-1", "Ralph-Run", "r2"); got != "" {
		t.Fatalf("other run matched: %q", got)
	}
	// ralph's folder goes to info/exclude once, never to .gitignore.
	for i := 0; i < 2; i++ {
		if err := r.EnsureExcluded(ctx, "/.ralph/"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".git", "info", "exclude"))
	if strings.Count(string(b), "/.ralph/") != 1 {
		t.Fatalf("exclude: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, ".gitignore")); err == nil {
		t.Fatal(".gitignore was written")
	}
}

// Concurrent workers build git commands at once: the identity check must
// be race-free and give every caller the same answer (run with -race).
func TestGitEnvConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	envs := make([][]string, 16)
	for i := range envs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			envs[i] = gitEnv()
		}(i)
	}
	wg.Wait()
	for i := range envs {
		if strings.Join(envs[i], "\n") != strings.Join(envs[0], "\n") {
			t.Fatalf("caller %d got another environment", i)
		}
	}
}

// TestWhere: the branch and head git reports on an unborn branch, after a
// commit, and with HEAD detached.
func TestWhere(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	check := func(what, wantBranch string, wantHead bool) string {
		t.Helper()
		b, h, err := r.Where(ctx)
		if err != nil || b != wantBranch || (h != "") != wantHead || r.HasCommits(ctx) != wantHead {
			t.Fatalf("%s: Where = %q %q %v, HasCommits %v", what, b, h, err, r.HasCommits(ctx))
		}
		return h
	}
	check("unborn", "main", false)
	if r.BranchExists(ctx, "main") {
		t.Fatal("an unborn branch exists")
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	r.AddAll(ctx)
	sha, err := r.Commit(ctx, "one\n", false)
	if err != nil {
		t.Fatal(err)
	}
	if h := check("committed", "main", true); h != sha || !r.BranchExists(ctx, "main") {
		t.Fatalf("head %s, commit %s", h, sha)
	}
	r.Run(ctx, "checkout", "-q", "--detach")
	check("detached", "HEAD", true)
	if b, err := r.CurrentBranch(ctx); b != "" || err != nil {
		t.Fatalf("CurrentBranch detached = %q, %v", b, err)
	}
	common, err := r.CommonDir(ctx)
	if want, _ := filepath.EvalSymlinks(filepath.Join(dir, ".git")); err != nil || common != want && common != filepath.Join(dir, ".git") {
		t.Fatalf("CommonDir = %q, %v", common, err)
	}
}
