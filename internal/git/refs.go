package git

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ralph-loop/ralph/internal/proc"
)

// The files below are read without starting git: where HEAD is and whether
// the index moved are asked once or twice per iteration, and a git process
// costs more than the rest of ralph's own work on a passing story. Only the
// plain layout is read — a .git folder or a linked worktree's gitdir file,
// loose refs and packed-refs; anything else (a reftable repository, a
// symbolic ref chain, GIT_DIR and friends in the environment, a fake
// runner in a unit test) answers "not known" and the caller asks git.

// gitDirs returns the work tree's own git folder (HEAD, index) and the
// common one (refs), or ok=false when the layout is not the plain one.
func (r *Repo) gitDirs() (dir, common string, ok bool) {
	if _, real := r.Runner.(proc.Exec); !real {
		return "", "", false
	}
	for _, v := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"} {
		if os.Getenv(v) != "" {
			return "", "", false
		}
	}
	dot := filepath.Join(r.Dir, ".git")
	fi, err := os.Stat(dot)
	switch {
	case err != nil:
		return "", "", false
	case fi.IsDir():
		dir = dot
	default:
		b, err := os.ReadFile(dot)
		if err != nil {
			return "", "", false
		}
		p, found := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !found {
			return "", "", false
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.Dir, p)
		}
		dir = p
	}
	common = dir
	if b, err := os.ReadFile(filepath.Join(dir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(dir, c)
		}
		common = filepath.Clean(c)
	}
	return dir, common, true
}

// readWhere is Where from the files: the branch HEAD names and the commit
// it points at ("" on an unborn branch).
func (r *Repo) readWhere() (branch, head string, ok bool) {
	dir, common, ok := r.gitDirs()
	if !ok {
		return "", "", false
	}
	b, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err != nil {
		return "", "", false
	}
	s := strings.TrimSpace(string(b))
	ref, symbolic := strings.CutPrefix(s, "ref: ")
	if !symbolic {
		if fullSHA.MatchString(s) {
			return "HEAD", s, true // detached, as rev-parse --symbolic-full-name says
		}
		return "", "", false
	}
	if !strings.HasPrefix(ref, "refs/heads/") || ref == "refs/heads/.invalid" {
		return "", "", false // reftable, or something unusual
	}
	sha, found, ok := readRef(common, ref)
	if !ok {
		return "", "", false
	}
	if !found {
		return strings.TrimPrefix(ref, "refs/heads/"), "", true
	}
	return strings.TrimPrefix(ref, "refs/heads/"), sha, true
}

// readRef resolves a branch ref from its loose file or packed-refs.
func readRef(common, ref string) (sha string, found, ok bool) {
	b, err := os.ReadFile(filepath.Join(common, filepath.FromSlash(ref)))
	if err == nil {
		s := strings.TrimSpace(string(b))
		if fullSHA.MatchString(s) {
			return s, true, true
		}
		return "", false, false // a symbolic ref: git knows
	}
	if !os.IsNotExist(err) {
		return "", false, false
	}
	f, err := os.Open(filepath.Join(common, "packed-refs"))
	if os.IsNotExist(err) {
		return "", false, true
	}
	if err != nil {
		return "", false, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	want := []byte(" " + ref)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasSuffix(line, want) {
			s := string(line[:len(line)-len(want)])
			if fullSHA.MatchString(s) {
				return s, true, true
			}
			return "", false, false
		}
	}
	if sc.Err() != nil {
		return "", false, false
	}
	return "", false, true
}

// IndexStamp identifies the current version of the work tree's index file
// (device, inode, size, modification time): git replaces the file through
// a lock file on every write, so an unchanged stamp means an unchanged
// index. "" when it cannot be read from the files; never equal then.
func (r *Repo) IndexStamp() string {
	dir, _, ok := r.gitDirs()
	if !ok {
		return ""
	}
	return fileStamp(filepath.Join(dir, "index"))
}

// fileStamp is IndexStamp of any file: "" when it cannot be read.
func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// RefSHA is the commit a full ref name (refs/…) points at, read from the
// files when the layout allows, else asked of git.
func (r *Repo) RefSHA(ctx context.Context, ref string) (string, error) {
	if _, common, ok := r.gitDirs(); ok && strings.HasPrefix(ref, "refs/") {
		if sha, found, ok := readRef(common, ref); ok && found {
			return sha, nil
		}
	}
	return r.RevParse(ctx, ref)
}
