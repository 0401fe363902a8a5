package judge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// Env are the dependency folders the base had: folders git ignores that
// the gates need (node_modules, a virtualenv), taken when the run took
// its environment, before any agent ran, and given to every checkout of
// the judge exactly as they were then. An agent that edits a package in
// the tree's node_modules, or replaces a test runner there, changes its
// own copy, never the judge's; a gate that writes into the judge's copy
// (a cache) gets a fresh copy before the next judging.
type Env struct {
	dir   string // the snapshots: <dir>/<name>
	names []string
	sums  map[string]string // name → the snapshot's manifest

	mu    sync.Mutex
	given map[string]string // checkout folder/name → manifest it was given with
	// seen notices a change in a folder given (nil: none here, and each
	// giving walks it).
	seen *changes
}

// EnvFolders are the dependency folders the judge looks for at the
// repository's root.
var EnvFolders = []string{"node_modules", ".venv", "venv"}

// OpenEnv takes the dependency folders of the tree at root that git
// ignores into dir (.ralph/judge/env), once per run: a run resumed by
// another process keeps the ones its start took.
func OpenEnv(ctx context.Context, repo *git.Repo, root, dir, runID string) (*Env, error) {
	var present []string
	for _, n := range EnvFolders {
		if fi, err := os.Stat(filepath.Join(root, n)); err == nil && fi.IsDir() {
			present = append(present, n)
		}
	}
	if len(present) == 0 {
		_ = os.RemoveAll(dir)
		return nil, nil
	}
	ignored, err := repo.Ignored(ctx, present...)
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir, sums: map[string]string{}, given: map[string]string{}}
	for _, n := range present {
		if ignored[n] {
			e.names = append(e.names, n)
		}
	}
	if len(e.names) == 0 {
		return nil, nil
	}
	stamp := filepath.Join(dir, ".run")
	if b, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(b)) == runID {
		for _, n := range e.names {
			if sum, err := manifest(filepath.Join(dir, n)); err == nil {
				e.sums[n] = sum
			}
		}
		if len(e.sums) == len(e.names) {
			e.seen = newChanges()
			return e, nil
		}
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, n := range e.names {
		if err := copyTree(ctx, filepath.Join(root, n), filepath.Join(dir, n)); err != nil {
			return nil, fmt.Errorf("taking %s as the base has it: %w", n, err)
		}
		sum, err := manifest(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		e.sums[n] = sum
	}
	if err := os.WriteFile(stamp, []byte(runID+"\n"), 0o600); err != nil {
		return nil, err
	}
	e.seen = newChanges()
	return e, nil
}

// Names are the folders given to each checkout.
func (e *Env) Names() []string {
	if e == nil {
		return nil
	}
	return e.names
}

// Give puts each folder, as the base had it, into the checkout at dir:
// copied the first time, and again whenever a gate changed the copy. A
// copy is watched (changes) from when it was made: one nothing touched
// since is not walked again, so judging costs the same with a folder of
// any size; where there is no watch, a walk compares it (manifest).
func (e *Env) Give(ctx context.Context, dir string) error {
	if e == nil {
		return nil
	}
	for _, n := range e.names {
		dst := filepath.Join(dir, n)
		key := dst
		e.mu.Lock()
		had := e.given[key]
		e.mu.Unlock()
		if had != "" {
			switch e.seen.state(dst) {
			case untouched:
				continue
			case unwatched:
				if now, err := manifest(dst); err == nil && now == e.sums[n] {
					continue
				}
			}
		}
		e.seen.forget(dst)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := copyTree(ctx, filepath.Join(e.dir, n), dst); err != nil {
			return err
		}
		e.seen.watch(dst)
		e.mu.Lock()
		e.given[key] = e.sums[n]
		e.mu.Unlock()
	}
	return nil
}

// watchState is what the watch of a folder given saw.
type watchState int

const (
	unwatched watchState = iota // no watch: walk it
	untouched                   // nothing happened under it
	touched                     // something did: copy it afresh
)

// Close stops watching the copies given (a later Give walks them).
func (e *Env) Close() {
	if e != nil {
		e.seen.close()
	}
}

// manifest sums a folder's entries: paths, types, sizes, modes and
// modification times (a changed file changes one of them; the contents
// are not read, so it costs a walk).
func manifest(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\n", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// copyTree copies src to dst (which must not exist) with modes, times and
// links: cp(1) where it is GNU's (a copy-on-write clone where the file
// system has them), else in Go.
func copyTree(ctx context.Context, src, dst string) error {
	if runtime.GOOS == "linux" {
		res, err := proc.Exec{}.Run(ctx, proc.Cmd{Argv: []string{"cp", "-a", "--reflink=auto", "--", src, dst}})
		if err == nil && res.ExitCode == 0 {
			return nil
		}
		_ = os.RemoveAll(dst)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm()|0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return os.Chtimes(to, fi.ModTime(), fi.ModTime())
	})
}
