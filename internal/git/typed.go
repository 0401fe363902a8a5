package git

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/proc"
)

// ForceCheckoutBranch puts the tree on branch, created or reset at start;
// --force discards tracked changes, so the tree is the branch's exactly.
func (r *Repo) ForceCheckoutBranch(ctx context.Context, branch, start string) error {
	_, err := r.Run(ctx, "checkout", "--quiet", "--force", "-B", branch, start)
	return err
}

// HasPath reports whether path exists in rev's tree.
func (r *Repo) HasPath(ctx context.Context, rev, path string) bool {
	return r.ok(ctx, "cat-file", "-e", rev+":"+path)
}

// RestorePath puts rev's version of path into the index and the tree.
func (r *Repo) RestorePath(ctx context.Context, rev, path string) error {
	_, err := r.Run(ctx, "checkout", rev, "--", ":(literal)"+path)
	return err
}

// Unstage drops path's staged changes (the tree keeps them).
func (r *Repo) Unstage(ctx context.Context, path string) error {
	_, err := r.Run(ctx, "reset", "-q", "HEAD", "--", ":(literal)"+path)
	return err
}

// UnmergedPaths lists the paths a merge left conflicted.
func (r *Repo) UnmergedPaths(ctx context.Context) ([]string, error) {
	out, err := r.Run(ctx, "diff", "--name-only", "--diff-filter=U")
	if err != nil {
		return nil, err
	}
	return lines(out), nil
}

// CleanUntracked removes every untracked and ignored file in the tree.
func (r *Repo) CleanUntracked(ctx context.Context) error {
	_, err := r.Run(ctx, "clean", "-fdxq")
	return err
}

// MergeNoCommit merges branch into the current branch and stops before
// committing (conflicts stay in the tree).
func (r *Repo) MergeNoCommit(ctx context.Context, branch string) error {
	_, err := r.Run(ctx, "merge", "--no-ff", "--no-commit", branch)
	return err
}

// CountCommits counts the commits in a revision range ("base..HEAD").
func (r *Repo) CountCommits(ctx context.Context, rng string) (int, error) {
	out, err := r.Run(ctx, "rev-list", "--count", rng, "--")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// MergeConflicts tells whether head would merge into base without
// conflicts, without touching the tree or the index: nil when it merges
// cleanly, else the conflicted paths. An error means git could not tell.
func (r *Repo) MergeConflicts(ctx context.Context, base, head string) ([]string, error) {
	out, err := r.Run(ctx, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, head)
	if err == nil {
		return nil, nil
	}
	var ee *proc.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		return nil, err
	}
	// Exit 1 is "conflicts" when the output starts with the merged tree's
	// id (then the paths); git also exits 1 for a revision it cannot
	// merge, with nothing on stdout.
	paths := lines(out)
	if len(paths) == 0 || !fullSHA.MatchString(paths[0]) {
		return nil, err
	}
	return paths[1:], nil
}

// Ignored returns those of paths git ignores, in one call.
func (r *Repo) Ignored(ctx context.Context, paths ...string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(paths) == 0 {
		return out, nil
	}
	c := r.cmd("check-ignore", "-z", "--stdin")
	c.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	stdout, err := proc.Output(ctx, r.Runner, c)
	var ee *proc.ExitError
	if errors.As(err, &ee) && ee.Code == 1 { // none of them is ignored
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, p := range strings.Split(stdout, "\x00") {
		if p != "" {
			out[p] = true
		}
	}
	return out, nil
}

// IndexMatches reports whether the index holds rev's version of every one
// of paths (a path in neither counts as matching). It reads the index and
// rev's tree only, never the work tree, so its cost does not grow with the
// size of the files.
func (r *Repo) IndexMatches(ctx context.Context, rev string, paths ...string) bool {
	return r.ok(ctx, append([]string{"diff-index", "--cached", "--quiet", rev, "--"}, literal(paths)...)...)
}

// SamePaths reports whether revisions a and b hold the same version of
// every one of paths (a path in neither counts as the same).
func (r *Repo) SamePaths(ctx context.Context, a, b string, paths ...string) bool {
	return r.ok(ctx, append([]string{"diff", "--quiet", "--no-renames", "--no-ext-diff", a, b, "--"}, literal(paths)...)...)
}

// ResetMerge undoes a merge that was staged but not committed, the way
// `git merge --abort` does: paths the merge did not touch keep their
// uncommitted changes.
func (r *Repo) ResetMerge(ctx context.Context) error {
	_, err := r.Run(ctx, "reset", "--merge", "HEAD")
	return err
}

func literal(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = ":(literal)" + p
	}
	return out
}

// HasStagedChanges reports whether the index differs from HEAD.
func (r *Repo) HasStagedChanges(ctx context.Context) bool {
	res, err := r.Runner.Run(ctx, r.cmd("diff", "--cached", "--quiet"))
	return err == nil && res.ExitCode == 1
}

// DeleteBranches force-deletes local branches in one call. Names are
// deduplicated first: git rejects the whole call when one repeats. A
// branch checked out in a worktree makes git refuse (and report) it.
func (r *Repo) DeleteBranches(ctx context.Context, names ...string) error {
	seen := map[string]bool{}
	args := []string{"branch", "-D", "--"}
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			args = append(args, n)
		}
	}
	if len(seen) == 0 {
		return nil
	}
	_, err := r.Run(ctx, args...)
	return err
}

// ListBranches lists the local branches whose names start with prefix
// (a folder such as "ralph/").
func (r *Repo) ListBranches(ctx context.Context, prefix string) ([]string, error) {
	out, err := r.Run(ctx, "for-each-ref", "--format=%(refname:short)", "refs/heads/"+prefix)
	if err != nil {
		return nil, err
	}
	return lines(out), nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// WriteTree writes the index as a tree object and returns its id: the
// exact content a commit made from the index would hold.
func (r *Repo) WriteTree(ctx context.Context) (string, error) {
	return r.Run(ctx, "write-tree")
}

// DiffTrees lists the paths that differ between two trees (or commits).
func (r *Repo) DiffTrees(ctx context.Context, a, b string) ([]string, error) {
	out, err := r.Run(ctx, "diff", "--name-only", "--no-renames", a, b, "--")
	if err != nil {
		return nil, err
	}
	return lines(out), nil
}

// TrailerIndex maps, for the commits of rev that carry "runKey: runID",
// each value of trailer key to the newest commit carrying it — one git
// call however many items a run recorded. An empty runKey takes the
// commits of every run.
func (r *Repo) TrailerIndex(ctx context.Context, rev, key, runKey, runID string) (map[string]string, error) {
	grep := key + ": "
	if runKey != "" {
		grep = runKey + ": " + runID
	}
	out, err := r.Run(ctx, "log", "--fixed-strings", "--grep="+grep, "--format=%H%x1f%B%x1e", rev, "--")
	if err != nil {
		return nil, err
	}
	idx := map[string]string{}
	for _, rec := range strings.Split(out, "\x1e") {
		sha, body, ok := strings.Cut(strings.TrimSpace(rec), "\x1f")
		if !ok || runKey != "" && !strings.Contains("\n"+body+"\n", "\n"+runKey+": "+runID+"\n") {
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, key+": "); ok {
				if v = strings.TrimSpace(v); idx[v] == "" {
					idx[v] = sha // log lists the newest first
				}
			}
		}
	}
	return idx, nil
}

// BlobIDs maps each of paths that is a file in rev's tree to its blob id
// (one git call; paths that are not there are left out).
func (r *Repo) BlobIDs(ctx context.Context, rev string, paths []string) (map[string]string, error) {
	ids := map[string]string{}
	if len(paths) == 0 {
		return ids, nil
	}
	args := append([]string{"ls-tree", "-z", "--full-tree", rev, "--"}, paths...)
	out, err := r.Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	for _, rec := range strings.Split(out, "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[1] == "blob" {
			ids[p] = f[2]
		}
	}
	return ids, nil
}

// Blob returns the content of a blob.
func (r *Repo) Blob(ctx context.Context, id string) ([]byte, error) {
	out, err := proc.Output(ctx, r.Runner, r.cmd("cat-file", "blob", id))
	return []byte(out), err
}

// BlobID is the id git gives content as a blob, computed without git: the
// hash (SHA-1, or SHA-256 for a repository whose ids are 64 digits long,
// as like says) of "blob <size>\x00" and the content.
func BlobID(content []byte, like string) string {
	head := "blob " + strconv.Itoa(len(content)) + "\x00"
	if len(like) == 64 {
		h := sha256.New()
		h.Write([]byte(head))
		h.Write(content)
		return hex.EncodeToString(h.Sum(nil))
	}
	h := sha1.New()
	h.Write([]byte(head))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// RemoveStaleLocks removes the lock files git left behind in this
// repository — index.lock, HEAD.lock and the like of the main tree and of
// every worktree, and ref locks — that no live process has open. Git keeps
// a lock file open from creating it until it renames it into place, so a
// lock that no live process holds belongs to a git that died (say, killed
// with the agent of a crashed run) and would make every later git command
// fail. Where open files cannot be told (no /proc), nothing is removed and
// the locks are returned as kept. It returns what it removed and kept.
func (r *Repo) RemoveStaleLocks(ctx context.Context) (removed, kept []string, err error) {
	common, err := r.CommonDir(ctx)
	if err != nil {
		return nil, nil, err
	}
	var locks []string
	for _, dir := range append([]string{common}, globDirs(filepath.Join(common, "worktrees", "*"))...) {
		for _, name := range []string{"index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock"} {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				locks = append(locks, filepath.Join(dir, name))
			}
		}
	}
	_ = filepath.WalkDir(filepath.Join(common, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			locks = append(locks, p)
		}
		return nil
	})
	if len(locks) == 0 {
		return nil, nil, nil
	}
	openers, ok := proc.Openers(locks)
	for _, l := range locks {
		live := !ok
		for _, pid := range openers[l] {
			live = live || proc.Alive(pid)
		}
		if live {
			kept = append(kept, l)
			continue
		}
		if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, kept, err
		}
		removed = append(removed, l)
	}
	return removed, kept, nil
}

func globDirs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

// WorktreeBranches lists the branches checked out in any work tree of the
// repository (git refuses to delete those).
func (r *Repo) WorktreeBranches(ctx context.Context) (map[string]bool, error) {
	out, err := r.Run(ctx, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	m := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if ref, ok := strings.CutPrefix(l, "branch refs/heads/"); ok {
			m[ref] = true
		}
	}
	return m, nil
}

// ForceBranch points branch name at rev (created if missing). Git refuses
// it for a branch checked out in a work tree.
func (r *Repo) ForceBranch(ctx context.Context, name, rev string) error {
	_, err := r.Run(ctx, "branch", "--force", "--", name, rev)
	return err
}

// TreeOf is the tree a commit (or branch) holds.
func (r *Repo) TreeOf(ctx context.Context, rev string) (string, error) {
	return r.Run(ctx, "rev-parse", "--verify", "--quiet", rev+"^{tree}")
}

// MergeTrees merges commits a and b (their merge base found by git)
// without touching a tree or the index, and returns the merged tree;
// conflicted lists the paths that did not merge cleanly (then tree is "").
func (r *Repo) MergeTrees(ctx context.Context, a, b string) (tree string, conflicted []string, err error) {
	out, err := r.Run(ctx, "merge-tree", "--write-tree", "--name-only", "--no-messages", a, b)
	if err == nil {
		return strings.TrimSpace(out), nil, nil
	}
	var ee *proc.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		return "", nil, err
	}
	paths := lines(out)
	if len(paths) == 0 || !fullSHA.MatchString(paths[0]) {
		return "", nil, err
	}
	return "", paths[1:], nil
}

// CommitTree makes a commit object of tree on parent (no branch moves).
func (r *Repo) CommitTree(ctx context.Context, tree, parent, msg string) (string, error) {
	return r.Run(ctx, "commit-tree", tree, "-p", parent, "-m", msg)
}

// SwitchTree moves the index and the work tree from tree from (what the
// index holds) to tree to, writing only the files that differ; it refuses
// to overwrite a file with changes neither tree holds.
func (r *Repo) SwitchTree(ctx context.Context, from, to string) error {
	_, err := r.Run(ctx, "read-tree", "-m", "-u", from, to)
	return err
}

// ResetTree puts the index and the work tree at tree, whatever they hold
// (files the index had that tree lacks are removed); HEAD stays.
func (r *Repo) ResetTree(ctx context.Context, tree string) error {
	_, err := r.Run(ctx, "read-tree", "--reset", "-u", tree)
	return err
}
