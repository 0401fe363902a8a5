package judge

import (
	"context"
	"path"
	"slices"
	"strings"
	"time"
)

// The acceptance contract is pinned at the item's base before its agent
// runs: the base is a commit the agent cannot change, and the contract is
// made from it and the run's pinned policy (the gates, the item's checks
// and flags) alone, so it is the same whenever it is read.

// contract is item's contract at base (made once per item and base).
func (j *Judge) contract(ctx context.Context, item, base string, claim Claim) *Contract {
	key := item + "\x00" + base
	j.mu.Lock()
	if k, ok := j.contracts[key]; ok {
		j.mu.Unlock()
		return k
	}
	j.mu.Unlock()
	k := &Contract{Item: item, Base: base, Pinned: time.Now().UTC(), AllowTestChanges: claim.AllowTestChanges, Review: claim.Review, Declarations: j.Declarations}
	for _, g := range claim.Gates {
		k.Gates = append(k.Gates, g.Name+": "+g.Command)
	}
	for _, g := range claim.Checks {
		k.Checks = append(k.Checks, g.Name+": "+g.Command)
	}
	extra := append(slices.Clip(j.Protect), claim.Protect...)
	if base != "" {
		if files, err := j.Repo.TreeFiles(ctx, base); err == nil {
			for _, f := range files {
				if f.Type == "blob" && Protected(f.Path, extra) {
					k.Protected = append(k.Protected, f.Path)
				}
			}
		}
	}
	j.mu.Lock()
	if j.contracts == nil {
		j.contracts = map[string]*Contract{}
	}
	j.contracts[key] = k
	j.mu.Unlock()
	return k
}

// testDirs are folders whose files are tests or their data.
var testDirs = []string{"test", "tests", "__tests__", "testdata", "spec"}

// harnessFiles are the test harnesses' configuration files (by name).
var harnessFiles = []string{"conftest.py", "pytest.ini", "tox.ini", "noxfile.py", ".mocharc.js", ".mocharc.cjs", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", ".nycrc", ".nycrc.json"}

// harnessPrefixes are configuration files by prefix (jest.config.js,
// vitest.config.ts, …).
var harnessPrefixes = []string{"jest.config.", "vitest.config.", "vitest.workspace.", "karma.conf.", "playwright.config.", "cypress.config.", "ava.config."}

// Protected reports whether p (a repository-relative path) is a test file
// or test-harness configuration, or matches one of the extra globs: the
// files that decide whether the work passes, which the agent may not
// change unless a person allowed test changes for the item.
//
// package.json and pyproject.toml are protected only in their test
// sections (ProtectedSections): their dependencies are work.
func Protected(p string, extra []string) bool {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, "_test.go"),
		strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py"),
		strings.HasSuffix(base, "_test.py"),
		strings.Contains(base, ".test."), strings.Contains(base, ".spec."),
		strings.HasSuffix(base, "_spec.rb"), strings.HasSuffix(base, "_test.rb"),
		strings.HasSuffix(base, "Test.java"), strings.HasSuffix(base, "Tests.java"), strings.HasSuffix(base, "Test.kt"),
		slices.Contains(harnessFiles, base):
		return true
	}
	for _, pre := range harnessPrefixes {
		if strings.HasPrefix(base, pre) {
			return true
		}
	}
	for _, dir := range strings.Split(path.Dir(p), "/") {
		if slices.Contains(testDirs, dir) {
			return true
		}
	}
	for _, g := range extra {
		if Match(g, p) {
			return true
		}
	}
	return false
}

// ProtectedSections are files protected only in part: package.json's
// test scripts, pyproject.toml's and setup.cfg's pytest sections.
var ProtectedSections = []string{"package.json", "pyproject.toml", "setup.cfg"}

// Match reports whether the repository-relative path p matches glob g:
// a glob without a slash matches a file name anywhere ("*.snap"), one
// ending in a slash a folder anywhere ("fixtures/"); any other is matched
// from the repository's root, "*" within a folder name and "**" across
// folders ("e2e/**/*.ts").
func Match(g, p string) bool {
	g = strings.TrimPrefix(g, "/")
	switch {
	case strings.HasSuffix(g, "/"):
		dir := strings.TrimSuffix(g, "/")
		if !strings.Contains(dir, "/") {
			for _, d := range strings.Split(path.Dir(p), "/") {
				if ok, _ := path.Match(dir, d); ok {
					return true
				}
			}
			return false
		}
		return Match(dir+"/**", p)
	case !strings.Contains(g, "/"):
		ok, _ := path.Match(g, path.Base(p))
		return ok
	}
	return matchParts(strings.Split(g, "/"), strings.Split(p, "/"))
}

func matchParts(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			if len(g) == 1 {
				return true
			}
			for i := 0; i <= len(p); i++ {
				if matchParts(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}
