package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A repository's private homes are kept between runs (their caches make
// the next run fast) until the repository is gone: each repository's
// folder of homes says which repository it is, and a sandbox's start
// removes the homes of repositories no longer there — a deleted clone, a
// demo's temporary project, a test's — so their caches do not pile up
// under ~/.cache/ralph/homes.

// repositoryFile, in a repository's folder of homes, holds the path of
// its git folder.
const repositoryFile = "repository"

// trashPrefix names a folder of homes on its way out.
const trashPrefix = ".removing-"

// recordRepository notes in keyDir (a repository's folder of homes) which
// repository it belongs to.
func recordRepository(keyDir, repo string) {
	writeIfChanged(filepath.Join(keyDir, repositoryFile), []byte(repo+"\n"))
}

// pruneHomes removes, from dir, the homes of repositories that are gone.
// Each is first renamed out of the way, at once (no run ever sees a home
// half-removed), then deleted in the background; what a killed process
// left renamed is deleted by the next. A folder that does not say its
// repository, or whose repository cannot be checked, is kept. It returns
// the folders it took out.
func pruneHomes(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var gone, trash []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, trashPrefix) {
			trash = append(trash, filepath.Join(dir, name))
			continue
		}
		if strings.HasPrefix(name, ".") || !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name, repositoryFile))
		repo := strings.TrimSpace(string(b))
		if err != nil || !filepath.IsAbs(repo) {
			continue
		}
		if _, err := os.Stat(repo); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		t := filepath.Join(dir, fmt.Sprintf("%s%s-%d", trashPrefix, name, time.Now().UnixNano()))
		if os.Rename(filepath.Join(dir, name), t) == nil {
			gone = append(gone, name)
			trash = append(trash, t)
		}
	}
	if len(trash) > 0 {
		go func() {
			for _, t := range trash {
				_ = removeTree(t)
			}
		}()
	}
	return gone
}

// removeTree removes p and everything in it, read-only folders too (Go's
// module cache makes its folders read-only).
func removeTree(p string) error {
	_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
