package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ralph never makes a symbolic link in its own folder (.ralph). A link
// found there was put by someone else — an agent — to make ralph write
// its records (events, progress, prompts, transcripts, state, locks) into
// a file outside the repository. Every write in .ralph therefore goes
// through guard and OpenOwn: a link in the way, the file itself or a
// folder between .ralph and it, is removed (the file it pointed to is left
// alone) and ralph writes its own file in its place; files are opened with
// O_NOFOLLOW, so a link made after the check fails the open instead of
// being followed. Whole-file writes rename a temp file over the path,
// which replaces a link rather than writing through it. Every link
// removed is recorded for the run to report (ReplacedLinks).

// Link is a symbolic link ralph found and removed in its own folder.
type Link struct {
	Path   string // where it was
	Target string // what it pointed to
}

var replaced struct {
	sync.Mutex
	links []Link
}

// ReplacedLinks returns the links removed since the last call, and forgets
// them.
func ReplacedLinks() []Link {
	replaced.Lock()
	defer replaced.Unlock()
	l := replaced.links
	replaced.links = nil
	return l
}

// ownFolder is the .ralph folder path lies in, or "" (ralph's rules for
// its own files apply nowhere else: a user may well link a file of theirs).
func ownFolder(path string) string {
	for dir := filepath.Dir(path); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if filepath.Base(dir) == ".ralph" {
			return dir
		}
	}
	return ""
}

// dropLink removes path when it is a symbolic link, records it and
// reports whether it was one.
func dropLink(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return false
	}
	target, _ := os.Readlink(path)
	if os.Remove(path) != nil {
		return false
	}
	replaced.Lock()
	replaced.links = append(replaced.links, Link{Path: path, Target: target})
	replaced.Unlock()
	return true
}

// guard removes every link on the way from .ralph down to path (the folders
// between, remade as real folders, and path itself) when path lies in
// ralph's own folder.
func guard(path string) {
	own := ownFolder(path)
	if own == "" {
		return
	}
	rel, err := filepath.Rel(own, filepath.Dir(path))
	if err != nil {
		return
	}
	dir := own
	if dropLink(dir) {
		_ = os.Mkdir(dir, 0o700)
	}
	for _, part := range splitPath(rel) {
		dir = filepath.Join(dir, part)
		if dropLink(dir) {
			_ = os.Mkdir(dir, 0o700)
		}
	}
	dropLink(path)
}

// splitPath is rel's names, outermost first ("" and "." have none).
func splitPath(rel string) []string {
	var parts []string
	for rel != "." && rel != "" && rel != string(filepath.Separator) {
		parts = append([]string{filepath.Base(rel)}, parts...)
		rel = filepath.Dir(rel)
	}
	return parts
}

// OpenOwn opens path like os.OpenFile, except that in ralph's own folder
// it never follows a symbolic link: links on the way are removed first
// (guard) and the open itself refuses to follow one made since.
func OpenOwn(path string, flag int, perm os.FileMode) (*os.File, error) {
	if ownFolder(path) == "" {
		return os.OpenFile(path, flag, perm)
	}
	var f *os.File
	var err error
	for try := 0; try < 2; try++ {
		guard(path)
		if f, err = os.OpenFile(path, flag|syscall.O_NOFOLLOW, ownPerm(path, perm)); !errors.Is(err, syscall.ELOOP) {
			return f, err
		}
	}
	return nil, fmt.Errorf("%s: a symbolic link keeps appearing in ralph's folder; not writing through it", path)
}
