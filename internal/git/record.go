package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/proc"
)

// What the judge needs of git: the work tree recorded as a commit without
// touching the index the agent (or the user) left, that commit checked
// out in a folder of the judge's own, and the refs as they are.

// withEnv runs git in r.Dir with extra environment on top of gitEnv.
func (r *Repo) withEnv(ctx context.Context, env []string, stdin io.Reader, args ...string) (string, error) {
	c := r.cmd(args...)
	c.Env = append(c.Env, env...)
	c.Stdin = stdin
	out, err := proc.Output(ctx, r.Runner, c)
	return strings.TrimRight(out, "\n"), err
}

// GitPaths is `git rev-parse --git-path name` of each name made absolute,
// in one git process: where the work tree's own files of those names are
// (its index, its MERGE_HEAD).
func (r *Repo) GitPaths(ctx context.Context, names ...string) ([]string, error) {
	args := []string{"rev-parse"}
	for _, n := range names {
		args = append(args, "--git-path", n)
	}
	out, err := r.Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	paths := strings.Split(out, "\n")
	if len(paths) != len(names) {
		return nil, fmt.Errorf("git rev-parse --git-path: %d paths for %d names", len(paths), len(names))
	}
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.Dir, p)
		}
		paths[i] = filepath.Clean(p)
	}
	return paths, nil
}

// Snapshot is the work tree recorded as a tree in an index file of its
// own: the user's index is never touched.
type Snapshot struct {
	Tree  string
	Index string // the index file that holds Tree with the files' stats
	// Of is the work tree's own index the snapshot's began as a copy of
	// (where UseIndex puts it).
	Of string
}

// snapshotPrefix begins the name of a snapshot's index file, followed by
// the pid of the ralph that made it: one a killed ralph left behind is
// removed by the next run (RemoveDeadSnapshots), one a live ralph uses
// (a run in another work tree of the repository) is not.
const snapshotPrefix = "ralph-snapshot-"

// RemoveDeadSnapshots removes the snapshots' index files (and the locks
// a git killed with them left beside them) that ralph processes no longer
// alive made, in the repository's git folder gitDir and in each of its
// worktrees' folders. It returns what it removed.
func RemoveDeadSnapshots(gitDir string) []string {
	var removed []string
	dirs := append([]string{gitDir}, globDirs(filepath.Join(gitDir, "worktrees", "*"))...)
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, snapshotPrefix+"*"))
		for _, f := range files {
			pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(f), snapshotPrefix), "-")
			if n, err := strconv.Atoi(pid); err == nil && proc.Alive(n) {
				continue
			}
			if os.Remove(f) == nil {
				removed = append(removed, f)
			}
		}
	}
	return removed
}

// Remove deletes the snapshot's index file.
func (s *Snapshot) Remove() {
	if s != nil && s.Index != "" {
		_ = os.Remove(s.Index)
	}
}

// SnapshotTree records everything in the work tree but the paths in
// except (the user's files that were dirty before the run) and what git
// ignores, as git would commit it after `git add --all`, in an index file
// of its own (a copy of the work tree's index, so only changed files are
// hashed). Files that extra maps to bytes are recorded with those bytes
// instead of what the tree holds (ralph's own bookkeeping: a PRD with the
// story marked passed). Two or three git processes.
//
// The paths in except keep base's version in the snapshot (none, when
// base lacks them), whatever the index held for them: what the agent
// staged or committed of them is never recorded.
func (r *Repo) SnapshotTree(ctx context.Context, indexPath, base string, except []string, extra map[string][]byte) (*Snapshot, error) {
	idx, err := os.CreateTemp(filepath.Dir(indexPath), fmt.Sprintf("%s%d-*.index", snapshotPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	name := idx.Name()
	_ = idx.Close()
	snap := &Snapshot{Index: name, Of: indexPath}
	if err := copyFile(indexPath, name); err != nil && !errors.Is(err, os.ErrNotExist) {
		snap.Remove()
		return nil, err
	} else if errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(name) // no index yet: git makes one
	}
	env := []string{"GIT_INDEX_FILE=" + name}
	args := []string{"add", "--all", "--", "."}
	for _, p := range except {
		args = append(args, ":(exclude,literal)"+p)
	}
	if _, err := r.withEnv(ctx, env, nil, args...); err != nil {
		snap.Remove()
		return nil, err
	}
	if base != "" && len(except) > 0 {
		if _, err := r.withEnv(ctx, env, nil, append([]string{"reset", "-q", base, "--"}, literal(except)...)...); err != nil {
			snap.Remove()
			return nil, err
		}
	}
	if len(extra) > 0 {
		if err := r.addBlobs(ctx, env, extra); err != nil {
			snap.Remove()
			return nil, err
		}
	}
	tree, err := r.withEnv(ctx, env, nil, "write-tree")
	if err != nil {
		snap.Remove()
		return nil, err
	}
	snap.Tree = tree
	return snap, nil
}

// WithFiles is tree with the files of extra (repository-relative path →
// bytes) written into it, as a new tree: no work tree or index of anyone
// is touched.
func (r *Repo) WithFiles(ctx context.Context, tree string, extra map[string][]byte) (string, error) {
	return r.onTree(ctx, tree, func(env []string) error { return r.addBlobs(ctx, env, extra) })
}

// onTree reads tree into an index of its own, lets change edit it (env
// names that index) and writes the result as a new tree.
func (r *Repo) onTree(ctx context.Context, tree string, change func(env []string) error) (string, error) {
	idx, err := os.CreateTemp("", "ralph-tree-*.index")
	if err != nil {
		return "", err
	}
	name := idx.Name()
	_ = idx.Close()
	_ = os.Remove(name)
	defer os.Remove(name)
	env := []string{"GIT_INDEX_FILE=" + name}
	if _, err := r.withEnv(ctx, env, nil, "read-tree", tree); err != nil {
		return "", err
	}
	if err := change(env); err != nil {
		return "", err
	}
	return r.withEnv(ctx, env, nil, "write-tree")
}

// WithBlobs is tree with the blobs of files (path → blob id, objects the
// repository has) put in it, as a new tree.
func (r *Repo) WithBlobs(ctx context.Context, tree string, files map[string]string) (string, error) {
	return r.onTree(ctx, tree, func(env []string) error {
		var info strings.Builder
		for p, id := range files {
			fmt.Fprintf(&info, "100644 %s\t%s\n", id, p)
		}
		_, err := r.withEnv(ctx, env, strings.NewReader(info.String()), "update-index", "--add", "--index-info")
		return err
	})
}

// addBlobs writes each file of extra as a blob and puts it in the index
// env names.
func (r *Repo) addBlobs(ctx context.Context, env []string, extra map[string][]byte) error {
	var info strings.Builder
	for p, b := range extra {
		id, err := r.withEnv(ctx, nil, strings.NewReader(string(b)), "hash-object", "-w", "--no-filters", "--stdin")
		if err != nil {
			return err
		}
		fmt.Fprintf(&info, "100644 %s\t%s\n", id, p)
	}
	_, err := r.withEnv(ctx, env, strings.NewReader(info.String()), "update-index", "--add", "--index-info")
	return err
}

// copyFile copies src to dst (created or truncated).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// UseIndex makes the snapshot's index the work tree's own (a rename onto
// Of): after its commit landed, the index of the tree that was recorded
// is exactly the commit, with the files' stats, and the next status costs
// no hashing.
func (s *Snapshot) UseIndex() error {
	if s == nil || s.Index == "" {
		return nil
	}
	err := os.Rename(s.Index, s.Of)
	s.Index = ""
	return err
}

// CommitTreeEnv is CommitTree with the message on stdin (any text is safe)
// and extra environment (a fixed date, an author).
func (r *Repo) CommitTreeMsg(ctx context.Context, tree string, parents []string, msg string) (string, error) {
	args := []string{"commit-tree", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	return r.withEnv(ctx, nil, strings.NewReader(msg), append(args, "-F", "-")...)
}

// UpdateRef moves ref to newSHA only if it is at oldSHA ("" for a ref that
// must not exist yet): the one compare-and-swap every landing goes through.
func (r *Repo) UpdateRef(ctx context.Context, ref, newSHA, oldSHA, why string) error {
	args := []string{"update-ref", "-m", why, ref, newSHA}
	if oldSHA == "" {
		args = append(args, strings.Repeat("0", len(newSHA)))
	} else {
		args = append(args, oldSHA)
	}
	_, err := r.Run(ctx, args...)
	return err
}

// DeleteRef removes ref if it is at oldSHA ("" whatever it is).
func (r *Repo) DeleteRef(ctx context.Context, ref, oldSHA string) error {
	args := []string{"update-ref", "-d", ref}
	if oldSHA != "" {
		args = append(args, oldSHA)
	}
	_, err := r.Run(ctx, args...)
	return err
}

// Refs maps every ref under the given prefixes (refs/heads/, refs/tags/,
// …; none: all) to the object it names, in one git call.
func (r *Repo) Refs(ctx context.Context, prefixes ...string) (map[string]string, error) {
	refs, _, err := r.RefsAndHead(ctx, prefixes...)
	return refs, err
}

// RefsAndHead is Refs with the branch the work tree's HEAD is on, in the
// same git call: "" when HEAD is detached, on a branch with no commit,
// or on one outside the prefixes.
func (r *Repo) RefsAndHead(ctx context.Context, prefixes ...string) (map[string]string, string, error) {
	out, err := r.Run(ctx, append([]string{"for-each-ref", "--format=%(refname) %(objectname) %(HEAD)"}, prefixes...)...)
	if err != nil {
		return nil, "", err
	}
	refs, head := map[string]string{}, ""
	for _, l := range lines(out) {
		// A ref name has no spaces; %(HEAD) is "*" for HEAD's branch and
		// a space for every other ref.
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		refs[f[0]] = f[1]
		if len(f) == 3 && f[2] == "*" {
			head = f[0]
		}
	}
	return refs, head, nil
}

// Change is one path a diff between two trees names.
type Change struct {
	Path    string
	Status  byte // A, D, M, T
	OldMode string
	NewMode string
	OldBlob string
	NewBlob string
	Added   int // lines; -1 for a binary file
	Deleted int
}

// Gitlink is the mode of a submodule (a nested repository) entry.
const Gitlink = "160000"

// Changes lists what differs between trees (or commits) a and b, with
// modes, blob ids and line counts, in one git call.
func (r *Repo) Changes(ctx context.Context, a, b string) ([]Change, error) {
	out, err := r.Run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", "--no-commit-id", a, b)
	if err != nil {
		return nil, err
	}
	return parseRawNumstat(out), nil
}

// parseRawNumstat reads `diff-tree -z --raw --numstat`: the raw records
// (":old new oldblob newblob S\0path\0") come first, then the numstat
// ones ("added\tdeleted\tpath\0"), in the same order.
func parseRawNumstat(out string) []Change {
	fields := strings.Split(out, "\x00")
	var changes []Change
	i := 0
	for ; i+1 < len(fields) && strings.HasPrefix(fields[i], ":"); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) < 5 {
			continue
		}
		changes = append(changes, Change{Path: fields[i+1], OldMode: meta[0], NewMode: meta[1], OldBlob: meta[2], NewBlob: meta[3], Status: meta[4][0]})
	}
	n := 0
	for ; i < len(fields) && n < len(changes); i++ {
		parts := strings.SplitN(fields[i], "\t", 3)
		if len(parts) < 3 {
			continue
		}
		c := &changes[n]
		if parts[0] == "-" {
			c.Added, c.Deleted = -1, -1
		} else {
			c.Added, _ = strconv.Atoi(parts[0])
			c.Deleted, _ = strconv.Atoi(parts[1])
		}
		n++
	}
	return changes
}

// TreeFiles lists every file path of tree (recursively) with its mode and
// blob id, in one git call.
func (r *Repo) TreeFiles(ctx context.Context, tree string) ([]TreeEntry, error) {
	out, err := r.Run(ctx, "ls-tree", "-r", "-z", "--full-tree", tree)
	if err != nil {
		return nil, err
	}
	var entries []TreeEntry
	for _, rec := range strings.Split(out, "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) < 3 {
			continue
		}
		entries = append(entries, TreeEntry{Path: path, Mode: f[0], Type: f[1], ID: f[2]})
	}
	return entries, nil
}

// TreeEntry is one entry of ls-tree.
type TreeEntry struct {
	Path, Mode, Type, ID string
}

// Checkout is a folder that holds one commit's files, checked out by git
// from the repository's own objects with an index of its own: not a
// worktree (no admin entry in .git/worktrees to half-make or prune), and
// never the agent's tree.
type Checkout struct {
	Dir    string // the files
	Index  string // its index file
	GitDir string // the repository's (common) git folder
	Runner proc.Runner
}

// git runs git in the checkout, on its own index.
func (c *Checkout) git(ctx context.Context, args ...string) (string, error) {
	r := &Repo{Dir: c.Dir, Runner: c.Runner}
	return r.withEnv(ctx, []string{"GIT_DIR=" + c.GitDir, "GIT_WORK_TREE=" + c.Dir, "GIT_INDEX_FILE=" + c.Index}, nil, args...)
}

// Switch makes the checkout hold exactly commit: files that differ are
// written, files commit lacks are removed, and so is everything else
// untracked or ignored but the paths in keep (dependency folders given to
// the judge). Two git processes; a first checkout writes every file.
func (c *Checkout) Switch(ctx context.Context, commit string, keep []string) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	// A git killed here earlier left its lock: the checkout is ralph's
	// alone, so the lock is stale.
	_ = os.Remove(c.Index + ".lock")
	if _, err := c.git(ctx, "read-tree", "--reset", "-u", commit); err != nil {
		// A corrupt index (a kill mid-write): start over from nothing.
		_ = os.Remove(c.Index)
		if _, err2 := c.git(ctx, "read-tree", "--reset", "-u", commit); err2 != nil {
			return fmt.Errorf("checking out %s for the judge: %w", short(commit), err)
		}
	}
	args := []string{"clean", "-ffdxq"}
	for _, k := range keep {
		args = append(args, "-e", "/"+k)
	}
	_, err := c.git(ctx, args...)
	return err
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// Blobs reads the contents of blobs by id, in one git call (cat-file
// --batch): the judge reads a tree's test files from the objects it
// judged, not from a folder a gate could have written into.
func (r *Repo) Blobs(ctx context.Context, ids []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	c := r.cmd("cat-file", "--batch")
	c.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	raw, err := proc.Output(ctx, r.Runner, c)
	if err != nil {
		return nil, err
	}
	for rest := raw; rest != ""; {
		head, body, ok := strings.Cut(rest, "\n")
		if !ok {
			return nil, fmt.Errorf("git cat-file --batch: a header without its line end: %q", head)
		}
		f := strings.Fields(head)
		if len(f) == 2 && f[1] == "missing" {
			return nil, fmt.Errorf("git cat-file --batch: object %s is missing", f[0])
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file --batch: unexpected header %q", head)
		}
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 || size+1 > len(body) {
			return nil, fmt.Errorf("git cat-file --batch: object %s: size %q does not fit the output", f[0], f[2])
		}
		out[f[0]] = []byte(body[:size])
		rest = body[size+1:]
	}
	return out, nil
}
