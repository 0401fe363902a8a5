package cluster

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// Attestations are the gate results workers report, by the coordinator's
// tree they were fetched into. The coordinator's gate runner asks them
// first (gate.Runner.Attested): when the tree is still exactly the commit
// the worker's gates ran on — the branch at that commit, nothing changed
// or added — and the gates asked for are the ones the worker ran, their
// results stand for the tree and the gates are not run twice. Anything
// else (the tree touched since, other gates, the integrated tree of the
// merge queue) runs the gates here. Each report is used once.
type Attestations struct {
	Repo *git.Repo // the coordinator's repository
	mu   sync.Mutex
	by   map[string]attestation // by tree folder
}

type attestation struct {
	commit, worker, host string
	gates                []gate.Gate
	results              []gate.Result
	skip                 []string
}

// Put records a worker's gate results for the tree at dir, fast-forwarded
// to commit; skip are paths of the tree that are never committed (a task
// tree's files), whose changes do not count.
func (a *Attestations) Put(dir, commit, worker, host string, gates []gate.Gate, results []gate.Result, skip []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.by == nil {
		a.by = map[string]attestation{}
	}
	a.by[dir] = attestation{commit: commit, worker: worker, host: host, gates: gates, results: results, skip: skip}
}

// Drop forgets the report for dir (the iteration went no further).
func (a *Attestations) Drop(dir string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.by, dir)
}

// Lookup is a gate.Runner's Attested.
func (a *Attestations) Lookup(ctx context.Context, dir string, gates []gate.Gate, log io.Writer) ([]gate.Result, bool, bool) {
	a.mu.Lock()
	at, ok := a.by[dir]
	delete(a.by, dir)
	a.mu.Unlock()
	if !ok || !slices.Equal(at.gates, gates) || len(at.results) == 0 {
		return nil, false, false
	}
	tree := a.Repo.At(dir)
	if _, head, err := tree.Where(ctx); err != nil || head != at.commit {
		return nil, false, false
	}
	if dirty, err := tree.StatusPorcelain(ctx, at.skip...); err != nil || len(dirty) > 0 {
		return nil, false, false
	}
	for i, r := range at.results {
		if i >= len(gates) || r.Name != gates[i].Name || r.Command != gates[i].Command {
			return nil, false, false
		}
	}
	passed := true
	fmt.Fprintln(log)
	for _, r := range at.results {
		fmt.Fprintf(log, "=== gate %s: %s on worker %s (%s) at %s (exit %d, %s)\n", r.Name, gate.PassWord(r.Passed), at.worker, at.host, short(at.commit), r.ExitCode, r.Duration.Round(time.Millisecond))
		passed = passed && r.Passed
	}
	// A report that stops before the last gate must be a failure.
	if passed && len(at.results) < len(gates) {
		return nil, false, false
	}
	return at.results, passed, true
}
