package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/usage"
)

// StartTree is what a new run makes of the work tree's uncommitted
// changes. It is the one rule: `ralph run` refuses to start on Refused
// (unless --allow-dirty) and `ralph doctor` reports the same verdict.
type StartTree struct {
	// Refused are the user's uncommitted changes: a run would mix them
	// into a story's commit, so it does not start on them.
	Refused []string
	// Kept are changes to the setup files ralph's own commands write
	// (StartConfig.Setup: an MCP client config from `ralph mcp install`):
	// accepted, and never committed by the run.
	Kept []string
}

// CheckStartTree looks at the tree at root for a new run of the source
// info describes: ralph's folder, the source's file and its control files
// are the run's own (an uncommitted prd.json right after `ralph init` is
// fine); setup are the files ralph's commands wrote, which are kept.
func CheckStartTree(ctx context.Context, vcs VCS, root string, info SourceInfo, setup []string) (StartTree, error) {
	skip := []string{".ralph/", relTo(root, info.Path)}
	for _, f := range info.ControlFiles {
		skip = append(skip, relTo(root, f))
	}
	dirty, err := vcs.Changed(ctx, root, skip...)
	if err != nil {
		return StartTree{}, err
	}
	var t StartTree
	for _, p := range dirty {
		if slices.Contains(setup, p) {
			t.Kept = append(t.Kept, p)
		} else {
			t.Refused = append(t.Refused, p)
		}
	}
	return t, nil
}

// Err is the refusal of a new run (nil when the tree is fine for it). A
// folder with many changed files is named once, with its count; one that
// looks generated (installed dependencies, a virtualenv, build output)
// gets the fix that fits it, a .gitignore line, rather than a commit.
func (t StartTree) Err() error {
	if len(t.Refused) == 0 {
		return nil
	}
	type entry struct {
		name, first string // the folder (or file), its first path
		n           int
	}
	var shown []entry
	at := map[string]int{}
	for _, p := range t.Refused {
		name := p
		if dir, _, ok := strings.Cut(p, "/"); ok {
			name = dir + "/"
		}
		if i, ok := at[name]; ok {
			shown[i].n++
			continue
		}
		at[name] = len(shown)
		shown = append(shown, entry{name, p, 1})
	}
	var parts, generated []string
	for _, e := range shown {
		if e.n == 1 {
			parts = append(parts, e.first)
		} else {
			parts = append(parts, fmt.Sprintf("%s (%d files)", e.name, e.n))
		}
		if slices.Contains(generatedDirs, strings.TrimSuffix(e.name, "/")) {
			generated = append(generated, e.name)
		}
	}
	more := ""
	if len(parts) > 5 {
		more = fmt.Sprintf(" and %d more", len(parts)-5)
		parts = parts[:5]
	}
	msg := fmt.Sprintf("the work tree has uncommitted changes (%s%s): commit or stash them, or pass --allow-dirty", strings.Join(parts, ", "), more)
	if len(generated) > 0 {
		msg += fmt.Sprintf("; %s look%s generated, which git should ignore: add %s to .gitignore and commit that",
			strings.Join(generated, " and "), map[bool]string{true: "s", false: ""}[len(generated) == 1], lines(generated))
	}
	return usage.Errorf("%s", msg)
}

// generatedDirs are folders that tools fill (dependencies, virtualenvs,
// caches, build output): untracked, they belong in .gitignore.
var generatedDirs = []string{
	"node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox", ".pytest_cache", ".mypy_cache", ".ruff_cache",
	"target", "dist", "build", "coverage", ".nyc_output", ".next", ".gradle", ".cache", ".eggs", ".parcel-cache",
}

// lines is the names as .gitignore lines, quoted: "a line `x/`", "lines
// `x/` and `y/`".
func lines(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	if len(q) == 1 {
		return "a line " + q[0]
	}
	return "lines " + strings.Join(q, " and ")
}
