package judge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
)

// Attestation is gate results ralph did not run here: a worker of `ralph
// coordinator` ran the item's gates on the commit it reported. They stand
// for exactly the tree they ran on, and for nothing else.
type Attestation struct {
	Tree    string // the tree the gates ran on
	By      string // who ran them ("worker build-1 on host")
	Gates   []gate.Gate
	Results []gate.Result
}

// Attester gives the attestation of an item's latest work, if any.
type Attester interface {
	Attested(item string) (Attestation, bool)
}

// attestation is the attestation that stands for the tree judged, with
// its results: the gates asked for are the ones it ran, and the tree
// judged is the one they ran on — but for ralph's own bookkeeping of the
// item (the PRD with the story marked passed), which ralph wrote and no
// agent did. Anything else (the work built onto other work that landed
// since, a file put back, other gates) and the gates run here; the log
// says why.
func (j *Judge) attestation(ctx context.Context, c *Case, gates []gate.Gate) (Attestation, bool) {
	if j.Attested == nil {
		return Attestation{}, false
	}
	a, ok := j.Attested.Attested(c.Item)
	if !ok || a.Tree == "" || len(a.Results) == 0 || len(a.Results) > len(gates) {
		return Attestation{}, false
	}
	if !slices.Equal(a.Gates, gates) {
		fmt.Fprintf(c.log(), "ralph: %s ran other gates than the ones judged here: they run here\n", a.By)
		return Attestation{}, false
	}
	for i, r := range a.Results {
		if r.Name != gates[i].Name || r.Command != gates[i].Command {
			return Attestation{}, false
		}
	}
	if a.Tree == c.tree {
		return a, true
	}
	differ, err := j.Repo.DiffTrees(ctx, a.Tree, c.tree)
	if err != nil {
		fmt.Fprintf(c.log(), "ralph: could not compare %s's tree %s with the tree judged here: the gates run here (%v)\n", a.By, short(a.Tree), err)
		return Attestation{}, false
	}
	var others []string
	for _, p := range differ {
		if !slices.Contains(c.marked, p) {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(c.log(), "ralph: %s's gates ran on tree %s; the tree judged here (%s) differs in %s: the gates run here\n", a.By, short(a.Tree), short(c.tree), list(others, 5))
		return Attestation{}, false
	}
	return a, true
}

// judgedByTrailer is the trailer that names who ran the gates of a
// landed commit.
const judgedByTrailer = "Ralph-Judged-By"

// attestedNote is the log's account of gates whose results came from
// by: one line per gate, as a gate run here has, then why they stand.
func attestedNote(item, by, tree string, results []gate.Result) string {
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "=== gate %s: %s on %s, tree %s (exit %d, %s)\n", r.Name, gate.PassWord(r.Passed), by, short(tree), r.ExitCode, r.Duration.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "ralph: %s's gates ran on %s, on exactly the tree judged here (%s): their results stand, and they are not run again here", item, by, short(tree))
	return b.String()
}
