package judge

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// npmLock is what package-lock.json (version 2 and 3) and npm's hidden
// lockfile (node_modules/.package-lock.json, which npm writes as it
// installs) say of each installed package, by its path.
type npmLock struct {
	Packages map[string]struct {
		Version   string `json:"version"`
		Integrity string `json:"integrity"`
	} `json:"packages"`
}

// checkNodeLock compares what npm installed in the node_modules the
// judge gives its checkouts (dir: the run's copy) with the repository's
// package-lock.json (root): a package installed in another version or
// from other bytes than the lock names, or one the lock does not have, is
// a dependency nobody reviewed, and no gate can be trusted on it. It
// stops the run with the fix (`npm ci`). A package the lock has and
// node_modules lacks (an optional one, dev dependencies left out) is not
// asked about. Without both files (yarn, pnpm, no lock) there is nothing
// to compare.
func checkNodeLock(root, dir string) error {
	lockPath := filepath.Join(root, "package-lock.json")
	installedPath := filepath.Join(dir, "node_modules", ".package-lock.json")
	lb, err := store.ReadFileLimit(lockPath, 256<<20)
	if err != nil {
		return nil
	}
	ib, err := store.ReadFileLimit(installedPath, 256<<20)
	if err != nil {
		return nil
	}
	var lock, installed npmLock
	if err := json.Unmarshal(lb, &lock); err != nil || lock.Packages == nil {
		return nil // a lockfile version 1 names no paths: npm ci checks it
	}
	if err := json.Unmarshal(ib, &installed); err != nil {
		return usage.Errorf("node_modules/.package-lock.json is not npm's: %v; reinstall with `npm ci`", err)
	}
	var off []string
	for p, got := range installed.Packages {
		if p == "" {
			continue
		}
		want, ok := lock.Packages[p]
		switch {
		case !ok:
			off = append(off, fmt.Sprintf("%s %s (not in package-lock.json)", strings.TrimPrefix(p, "node_modules/"), got.Version))
		case got.Version != want.Version:
			off = append(off, fmt.Sprintf("%s %s (package-lock.json: %s)", strings.TrimPrefix(p, "node_modules/"), got.Version, want.Version))
		case got.Integrity != "" && want.Integrity != "" && got.Integrity != want.Integrity:
			off = append(off, fmt.Sprintf("%s %s (other bytes than package-lock.json's integrity)", strings.TrimPrefix(p, "node_modules/"), got.Version))
		}
	}
	if len(off) == 0 {
		return nil
	}
	slices.Sort(off)
	more := ""
	if len(off) > 10 {
		off, more = off[:10], fmt.Sprintf("\n  … and %d more", len(off)-10)
	}
	return usage.Errorf("node_modules does not hold what package-lock.json names:\n  %s%s\nthe gates would judge the work on dependencies nobody reviewed: run `npm ci` (or commit the lock you want) and run again", strings.Join(off, "\n  "), more)
}
