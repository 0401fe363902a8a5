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

// Err is the refusal of a new run (nil when the tree is fine for it).
func (t StartTree) Err() error {
	if len(t.Refused) == 0 {
		return nil
	}
	shown, more := t.Refused, ""
	if len(shown) > 5 {
		more = fmt.Sprintf(" and %d more", len(shown)-5)
		shown = shown[:5]
	}
	return usage.Errorf("the work tree has uncommitted changes (%s%s): commit or stash them, or pass --allow-dirty", strings.Join(shown, ", "), more)
}
