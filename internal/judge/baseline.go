package judge

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/store"
)

// baselineFile is where the base's results are kept, under .ralph/.
const baselineFile = "baseline.json"

// Baseline is what the run-wide gates say about a base commit, taken on a
// checkout of it before any agent ran: the tests that pass there (each
// must still pass after every item) and what fails there already — work,
// listed up front, never blamed on an item and never called passed. A
// story's own checks are not part of it: they are asked per item, at its
// base (the contract).
type Baseline struct {
	// Run is the run it was taken for: a later run takes what failed
	// again (its cause, the environment say, may be fixed by then).
	Run     string        `json:"run,omitempty"`
	Commit  string        `json:"commit"`
	Taken   time.Time     `json:"taken"`
	Gates   []gate.Gate   `json:"gates"`
	Results []gate.Result `json:"results"`

	path  string
	j     *Judge
	mu    sync.Mutex
	known map[string][]gate.Result // other bases met (an item cut from a newer tip)
}

// Failing are the gates that failed at the base.
func (b *Baseline) Failing() []gate.Result {
	if b == nil {
		return nil
	}
	var out []gate.Result
	for _, r := range b.Results {
		if !r.Passed {
			out = append(out, r)
		}
	}
	return out
}

// TakeBaseline runs gates on a checkout of commit rev, or reads the
// results .ralph/baseline.json keeps for that commit and those gates:
// when every gate passed there, or the same run took them (a failure is
// taken again by a later run: its cause, the environment say, may have
// been fixed since). Every gate runs, also after one failed: the report
// names them all. A repository without commits has no baseline (nil).
func (j *Judge) TakeBaseline(ctx context.Context, runID, rev string, gates []gate.Gate, log io.Writer) (*Baseline, error) {
	commit, err := j.Repo.RevParse(ctx, rev)
	if err != nil || commit == "" {
		return nil, nil
	}
	b := &Baseline{path: filepath.Join(j.StateDir, baselineFile), j: j, Gates: gates, Run: runID}
	var saved Baseline
	if err := store.ReadJSON(b.path, &saved); err == nil && saved.Commit == commit && slices.Equal(saved.Gates, gates) && (len(saved.Failing()) == 0 || saved.Run == runID) {
		b.Commit, b.Taken, b.Results = saved.Commit, saved.Taken, saved.Results
		j.Baseline = b
		return b, nil
	}
	if err := j.verifyModules(ctx, commit, log); err != nil {
		return nil, err
	}
	results, err := j.runAt(ctx, commit, gates, log, false)
	if err != nil {
		return nil, err
	}
	b.Commit, b.Taken, b.Results = commit, time.Now().UTC(), results
	j.Baseline = b
	return b, b.save()
}

// runAt runs gates on a checkout of rev (a commit or a tree): every gate
// with all, else up to the first failure.
func (j *Judge) runAt(ctx context.Context, rev string, gates []gate.Gate, log io.Writer, firstFailure bool) ([]gate.Result, error) {
	if log == nil {
		log = io.Discard
	}
	co, err := j.Trees.Acquire(ctx, rev)
	if err != nil {
		return nil, err
	}
	defer j.Trees.Release(co)
	gctx, dir, done := j.view(ctx, co.Dir)
	defer done()
	if firstFailure {
		results, _ := j.Gates.Run(gctx, dir, gates, log)
		return results, ctx.Err()
	}
	var results []gate.Result
	for _, g := range gates {
		r, _ := j.Gates.Run(gctx, dir, []gate.Gate{g}, log)
		results = append(results, r...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// view is where gates see a checkout (View, else its own folder).
func (j *Judge) view(ctx context.Context, dir string) (context.Context, string, func()) {
	if j.View != nil {
		return j.View(ctx, dir)
	}
	return ctx, dir, func() {}
}

func (b *Baseline) save() error {
	if err := os.MkdirAll(filepath.Dir(b.path), 0o700); err != nil {
		return err
	}
	return store.WriteJSON(b.path, b)
}

// At is the run-wide gates' results at commit: the baseline's own, one
// this run recorded (Advance), or — the base moved since — the gates run
// there now. "" is the baseline's commit.
func (b *Baseline) At(ctx context.Context, commit string, log io.Writer) []gate.Result {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if commit == "" || commit == b.Commit {
		return b.Results
	}
	if r, ok := b.known[commit]; ok {
		return r
	}
	if log == nil {
		log = io.Discard
	}
	fmt.Fprintf(log, "\n=== the base moved to %s: the run-wide gates run there first (the baseline)\n", short(commit))
	results, err := b.j.runAt(ctx, commit, b.Gates, log, false)
	if err != nil {
		return b.Results // the older baseline is the best known
	}
	b.remember(commit, results)
	return results
}

// Advance records the run-wide gates' results on exactly the tree of
// commit (an item's commit that landed): the next item cut from it is
// judged against them with no second run.
func (b *Baseline) Advance(commit string, results []gate.Result) {
	if b == nil || commit == "" {
		return
	}
	var kept []gate.Result
	for _, g := range b.Gates {
		for _, r := range results {
			if r.Name == g.Name && r.Command == g.Command {
				kept = append(kept, r)
			}
		}
	}
	if len(kept) < len(b.Gates) {
		return // not every gate ran on it: take it when it is met
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remember(commit, kept)
	b.Commit, b.Results, b.Taken = commit, kept, time.Now().UTC()
	_ = b.save()
}

// remember keeps a few inventories (the newest bases are the ones items
// are cut from). Called with mu held.
func (b *Baseline) remember(commit string, results []gate.Result) {
	if b.known == nil || len(b.known) >= 64 {
		b.known = map[string][]gate.Result{}
	}
	b.known[commit] = results
}

// Red lists what fails at the base: each failing gate, and the tests it
// names, for the run's first words.
func (b *Baseline) Red() []string {
	var out []string
	for _, r := range b.Failing() {
		line := fmt.Sprintf("gate %s (`%s`) fails", r.Name, r.Command)
		if r.Tests != nil && r.Tests.PerTest {
			if red := r.FailedTests(); len(red) > 0 {
				line += ": " + list(red, 10)
			}
		} else if note := sandboxNote(r.Output, nil); note != "" {
			line += ": " + note
		} else if out := strings.TrimSpace(r.Output); out != "" {
			line += ": " + lastLine(out)
		}
		out = append(out, line)
	}
	return out
}

// RedRefs names what fails at the base as verdicts name what is still
// red: each failing test (gate: test), or the gate without a test
// inventory.
func (b *Baseline) RedRefs() []string {
	var out []string
	for _, r := range b.Failing() {
		var red []string
		for _, name := range r.FailedTests() {
			red = append(red, TestRef{Gate: r.Name, Test: name}.String())
		}
		if len(red) == 0 {
			red = []string{r.Name}
		}
		out = append(out, red...)
	}
	return out
}

// SandboxRed are the gates that fail at the base because the sandbox
// refused them something a setting of the user's allows (a host, a
// path): not work for the run but its setting, each with what the
// sandbox said.
func (b *Baseline) SandboxRed() []string {
	var out []string
	for _, r := range b.Failing() {
		if note := sandboxNote(r.Output, sandbox.Allowable); note != "" {
			out = append(out, fmt.Sprintf("gate %s (`%s`) FAILED: %s", r.Name, r.Command, note))
		}
	}
	return out
}

// sandboxNote is the first line of output where the sandbox says it
// refused the command something (and that ok takes, when given), or "".
func sandboxNote(output string, ok func(string) bool) string {
	if !sandbox.CausedBy(output) {
		return ""
	}
	for _, l := range strings.Split(output, "\n") {
		if i := strings.Index(l, strings.TrimSpace(sandbox.NotePrefix)); i >= 0 && (ok == nil || ok(l[i:])) {
			return strings.TrimSpace(l[i:])
		}
	}
	return ""
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// checkAt is check's result at base (the item's contract: a check that
// fails at the base and passes on the work is evidence), run once per
// base and command.
func (j *Judge) checkAt(ctx context.Context, base string, check gate.Gate, log io.Writer) (gate.Result, bool) {
	key := base + "\x00" + check.Command
	j.mu.Lock()
	r, ok := j.checksAt[key]
	j.mu.Unlock()
	if ok {
		return r, true
	}
	if log != nil {
		fmt.Fprintf(log, "\n=== the check %s on the item's base %s (its contract)\n", check.Name, short(base))
	}
	results, err := j.runAt(ctx, base, []gate.Gate{check}, log, false)
	if err != nil || len(results) == 0 {
		return gate.Result{}, false
	}
	j.mu.Lock()
	if j.checksAt == nil {
		j.checksAt = map[string]gate.Result{}
	}
	j.checksAt[key] = results[0]
	j.mu.Unlock()
	return results[0], true
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// verifyModules runs `go mod verify` where the gates run, on a Go
// module's base: a module in the gates' cache whose files were changed
// after go extracted them (go build does not hash them again) would let
// broken code pass every gate. It stops the run; anything else `go mod
// verify` says (offline, no go) is the gates' to meet.
func (j *Judge) verifyModules(ctx context.Context, commit string, log io.Writer) error {
	if _, err := j.Repo.Run(ctx, "cat-file", "-e", commit+":go.mod"); err != nil {
		return nil
	}
	rs, err := j.runAt(ctx, commit, []gate.Gate{{Name: "go mod verify", Command: "go mod verify"}}, log, true)
	if err != nil || len(rs) == 0 || rs[0].Passed {
		return err
	}
	var changed []string
	for _, l := range strings.Split(rs[0].Output, "\n") {
		if strings.Contains(l, "has been modified") {
			changed = append(changed, strings.TrimSpace(l))
		}
	}
	if len(changed) == 0 {
		return nil
	}
	return usage.Errorf("the gates' Go module cache holds modules changed after they were downloaded (`go mod verify`):\n  %s\nno gate can be trusted on them: remove them (`go clean -modcache` where the gates run, or ralph's gate home under ~/.cache/ralph/homes) and run again", strings.Join(changed, "\n  "))
}
