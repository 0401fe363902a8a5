package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/git"
)

// Nothing an agent made outside the commit may take part in the gates:
// a test file hidden by .git/info/exclude, a test runner replaced in a
// git-ignored node_modules/.bin, a build output that answers for the code.
// Files git ignores and that were created or changed since the run
// started — a file's change time (ctime) is set by the kernel on every
// write, rename, link or chmod, and no one but root can set it back — are
// moved out of the tree while the gates run, and put back after. What
// was there before the run (dependency folders installed by the user) is
// environment and stays. So are the files the gates themselves wrote
// (gateOutputs): a build cache a gate made in an earlier iteration is not
// the agent's, as long as it has not changed since.

// gateOutputs remembers, per tree, when the gates ran there: an ignored
// file whose change time falls inside one of those spans was written by a
// gate (the iteration's processes are gone by then), and is kept until
// something changes it. It lives as long as the run's process: after a
// crash those files are set aside once more, which costs a rebuild, not
// trust. It also remembers each tree's git folder, where set-aside files
// wait.
type gateOutputs struct {
	mu    sync.Mutex
	spans map[string][][2]time.Time // tree → when its gates ran
	// never are the files set aside once, per tree: the agent's, whatever
	// their change time says after the move back (the kernel's clock for
	// it is coarse, and could put it inside the span just recorded).
	never  map[string]map[string]bool
	gitDir map[string][2]string
	// hooksPathSeen is the core.hooksPath last reported (newHooksPath).
	hooksPathSeen string
}

func (o *gateOutputs) trusted(dir, path string, ctime time.Time) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.never[dir][path] {
		return false
	}
	for _, s := range o.spans[dir] {
		if ctime.After(s[0]) && !ctime.After(s[1]) {
			return true
		}
	}
	return false
}

// gatesRan records a span of gates on dir, and the files set aside then.
func (o *gateOutputs) gatesRan(dir string, from, to time.Time, aside []string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spans == nil {
		o.spans, o.never = map[string][][2]time.Time{}, map[string]map[string]bool{}
	}
	o.spans[dir] = append(o.spans[dir], [2]time.Time{from, to})
	if o.never[dir] == nil {
		o.never[dir] = map[string]bool{}
	}
	for _, p := range aside {
		o.never[dir][p] = true
	}
}

// asideDir is where a tree's set-aside files wait, in git's own folder
// for that tree: on the same file system (a rename), outside the tree
// (no gate or test runner finds them there).
func (o *gateOutputs) asideDir(ctx context.Context, repo *git.Repo) (string, error) {
	dirs, err := o.gitDirs(ctx, repo)
	if err != nil {
		return "", err
	}
	return filepath.Join(dirs[0], "ralph-aside"), nil
}

// gitDirs are repo's git folder and the common one (the main
// repository's, for a linked worktree), asked of git once per tree.
func (o *gateOutputs) gitDirs(ctx context.Context, repo *git.Repo) ([2]string, error) {
	o.mu.Lock()
	dirs, ok := o.gitDir[repo.Dir]
	o.mu.Unlock()
	if ok {
		return dirs, nil
	}
	out, err := repo.Run(ctx, "rev-parse", "--absolute-git-dir", "--git-common-dir")
	own, common, found := strings.Cut(out, "\n")
	if err != nil || !found {
		return dirs, fmt.Errorf("finding the git folder of %s: %v", repo.Dir, err)
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(repo.Dir, common)
	}
	dirs = [2]string{own, filepath.Clean(common)}
	o.mu.Lock()
	if o.gitDir == nil {
		o.gitDir = map[string][2]string{}
	}
	o.gitDir[repo.Dir] = dirs
	o.mu.Unlock()
	return dirs, nil
}

// disableNewHooks moves the git hooks written since since out of the
// repository's hooks folder (into ralph-disabled-hooks beside it) and
// returns their names. ralph runs git with hooks off, so they could not
// touch its commits; but left in place they would run for the user's own
// git commands.
func (o *gateOutputs) disableNewHooks(ctx context.Context, repo *git.Repo, since time.Time) []string {
	dirs, err := o.gitDirs(ctx, repo)
	if err != nil {
		return nil
	}
	hooks := filepath.Join(dirs[1], "hooks")
	entries, _ := os.ReadDir(hooks)
	var moved []string
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".sample") || !git.WrittenSince(filepath.Join(hooks, e.Name()), since) {
			continue
		}
		to := filepath.Join(dirs[1], "ralph-disabled-hooks", e.Name())
		if os.MkdirAll(filepath.Dir(to), 0o700) == nil && os.Rename(filepath.Join(hooks, e.Name()), to) == nil {
			moved = append(moved, e.Name())
		}
	}
	return moved
}

// newHooksPath reports a core.hooksPath in the repository's config when
// the config file was written since since — an agent's way to install
// hooks outside the hooks folder — once per value. ralph cannot tell the
// user's own setting from the agent's without the file as it was, so it
// leaves the setting and says where it points.
func (o *gateOutputs) newHooksPath(ctx context.Context, repo *git.Repo, since time.Time) string {
	dirs, err := o.gitDirs(ctx, repo)
	if err != nil || !git.WrittenSince(filepath.Join(dirs[1], "config"), since) {
		return ""
	}
	hp := repo.LocalHooksPath(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	if hp == "" || o.hooksPathSeen == hp {
		return ""
	}
	o.hooksPathSeen = hp
	return hp
}

// clock reads the file system's clock for change times, which is coarser
// than time.Now (a kernel tick): the change time of a probe file written
// in repo's git folder now. A gate span measured with it holds what the
// gates wrote, and nothing written in the same tick before they started.
func (o *gateOutputs) clock(ctx context.Context, repo *git.Repo) time.Time {
	store, err := o.asideDir(ctx, repo)
	if err == nil {
		probe := store + ".clock"
		if err = os.WriteFile(probe, nil, 0o600); err == nil {
			if fi, err := os.Lstat(probe); err == nil {
				return git.ChangeTime(fi)
			}
		}
	}
	return time.Now()
}

// aside is one judging's set-aside files.
type aside struct {
	dir   string // the tree
	store string
	moved []string
}

// setAside moves out of the tree at repo the ignored files created or
// changed since since, but the gates' own outputs and keep (the user's
// files and ralph's control files). A leftover of a judging
// a crash cut short is put back first.
func setAside(ctx context.Context, repo *git.Repo, since time.Time, outputs *gateOutputs, keep []string) (*aside, error) {
	store, err := outputs.asideDir(ctx, repo)
	if err != nil {
		return nil, err
	}
	a := &aside{dir: repo.Dir, store: store}
	if _, err := os.Stat(store); err == nil {
		a.moved = walkFiles(store)
		a.putBack()
	}
	ignored, err := repo.IgnoredFiles(ctx, ".ralph")
	if err != nil {
		return nil, err
	}
	a.moved = nil
	keep = append(keep, git.OwnExcluded()...) // ralph's own files: its state, a run folder's control files
	for _, p := range ignored {
		if keepsPath(keep, p) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(repo.Dir, p))
		if err != nil || fi.IsDir() {
			continue
		}
		ct := git.ChangeTime(fi)
		if ct.Before(since) || outputs.trusted(repo.Dir, p, ct) {
			continue
		}
		to := filepath.Join(store, p)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			a.putBack()
			return nil, err
		}
		if err := os.Rename(filepath.Join(repo.Dir, p), to); err != nil {
			a.putBack()
			return nil, fmt.Errorf("setting %s aside for the gates: %w", p, err)
		}
		a.moved = append(a.moved, p)
	}
	return a, nil
}

// putBack returns the set-aside files to the tree, but where a gate made
// a file of the same name: the gate's is the newer, and the agent's copy
// is dropped.
func (a *aside) putBack() {
	if a == nil {
		return
	}
	for _, p := range a.moved {
		from, to := filepath.Join(a.store, p), filepath.Join(a.dir, p)
		if _, err := os.Lstat(to); err == nil || os.MkdirAll(filepath.Dir(to), 0o755) != nil || os.Rename(from, to) != nil {
			_ = os.Remove(from)
		}
	}
	_ = os.RemoveAll(a.store)
}

// note is what the transcript and a failing verdict say of the files set
// aside ("" when none).
func (a *aside) note() string {
	if a == nil || len(a.moved) == 0 {
		return ""
	}
	list := a.moved
	more := ""
	if len(list) > 10 {
		list, more = list[:10], fmt.Sprintf(" and %d more", len(a.moved)-10)
	}
	return fmt.Sprintf("Files git ignores that this run created or changed were set aside while the gates ran (only the commit and what was there before the run are judged): %s%s. "+
		"If the gates need such files, make the gates create them (for example `npm ci && npm test`); files a person put there after the run started count once the run is started with --reload-policy (or --fresh).", strings.Join(list, ", "), more)
}

// removeGateFiles deletes the untracked files the gates left in the tree
// (a binary `go build` wrote, say): they were not judged, and never reach
// a commit. keep are the user's own files.
func removeGateFiles(ctx context.Context, repo *git.Repo, keep []string) []string {
	files, err := repo.UntrackedFiles(ctx)
	if err != nil {
		return nil
	}
	var removed []string
	for _, p := range files {
		if keepsPath(keep, p) {
			continue
		}
		if err := os.Remove(filepath.Join(repo.Dir, p)); err == nil || errors.Is(err, fs.ErrNotExist) {
			removed = append(removed, p)
		}
	}
	return removed
}

func keepsPath(keep []string, p string) bool {
	for _, k := range keep {
		if p == k || strings.HasPrefix(p, strings.TrimSuffix(k, "/")+"/") {
			return true
		}
	}
	return false
}

// walkFiles lists the files under root, relative to it.
func walkFiles(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if rel, err := filepath.Rel(root, p); err == nil {
				out = append(out, rel)
			}
		}
		return nil
	})
	return out
}
