// Package judge decides whether a claim passes: one entry point, one
// Check per defence, on exactly the commit that lands.
//
// This file holds what the judge records for people and tools: an item's
// acceptance contract (pinned at its base before the agent runs) and each
// judgement of a claim (the checks it ran, the gates, the evidence).
// Judgements are appended to .ralph/judged/<item>.jsonl, one line each;
// `ralph status`, the web dashboard and MCP read them.
package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// Contract is an item's acceptance contract: what a claim on it is held
// to, pinned at the item's base before its first agent run, where the
// agent cannot write it.
type Contract struct {
	Item   string    `json:"item"`
	Base   string    `json:"base"` // the commit it was pinned at
	Pinned time.Time `json:"pinned"`
	// Gates are the run-wide gates and Checks the item's own checks, as
	// "name: command".
	Gates  []string `json:"gates,omitempty"`
	Checks []string `json:"checks,omitempty"`
	// Protected are the protected files at the base: test files and
	// test-harness configuration, plus the configured protected globs.
	// The agent cannot change them unless a person allowed test changes.
	Protected        []string `json:"protected,omitempty"`
	AllowTestChanges bool     `json:"allow_test_changes,omitempty"`
	// Declarations: a protected Go test file may gain declarations (the
	// config's protected_rule), so it is not read-only to the agent; the
	// judge checks its old declarations are all still there.
	Declarations bool `json:"declarations,omitempty"`
	// Review names the role a person required to approve the item
	// (evidence by review rather than by a test).
	Review string `json:"review,omitempty"`
	// RedAtBase are the tests and checks that failed at the base: making
	// one pass is evidence. GreenAtBase counts the tests that passed
	// there, which must all still pass.
	RedAtBase   []TestRef `json:"red_at_base,omitempty"`
	GreenAtBase int       `json:"green_at_base"`
	// NoInventory names the gates whose test runner ralph does not
	// understand: their tests are not counted one by one.
	NoInventory []string `json:"no_inventory,omitempty"`
}

// TestRef names a test a gate ran ("" Test: the gate or check itself).
type TestRef struct {
	Gate string `json:"gate"`
	Test string `json:"test,omitempty"`
}

// String is "gate" or "gate: test".
func (t TestRef) String() string {
	if t.Test == "" {
		return t.Gate
	}
	return t.Gate + ": " + t.Test
}

// Evidence kinds: why ralph believes the item is done.
const (
	// EvidenceFixed: a check or protected test that failed at the base
	// passes on the commit.
	EvidenceFixed = "fixed"
	// EvidenceNewTest: a test the agent added passes on the commit and
	// fails when run against the base's code.
	EvidenceNewTest = "new-test"
	// EvidenceReview: the reviewer a person required approved.
	EvidenceReview = "review"
	// EvidenceCondition: a pipeline stage's exit condition, unmet at the
	// base, is met.
	EvidenceCondition = "condition"
)

// Evidence is one reason the judge believes an item is done.
type Evidence struct {
	Kind   string `json:"kind"`
	Gate   string `json:"gate,omitempty"`
	Test   string `json:"test,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// String is a short line for a commit's "Verified by ralph" line.
func (e Evidence) String() string {
	ref := TestRef{Gate: e.Gate, Test: e.Test}.String()
	switch e.Kind {
	case EvidenceFixed:
		return ref + " failed at the base and passes"
	case EvidenceNewTest:
		if e.Test == "" {
			return "the new tests of gate " + e.Gate + " pass and fail on the base's code"
		}
		return "new test " + ref + " passes and fails on the base's code"
	case EvidenceReview:
		return "approved by the " + e.Detail
	case EvidenceCondition:
		return "exit condition met: " + e.Detail
	}
	return e.Kind + " " + ref
}

// CheckResult is what one Check of the judge found.
type CheckResult struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// GateRun is one gate's result in a judgement.
type GateRun struct {
	Name       string `json:"name"`
	Command    string `json:"command"`
	Passed     bool   `json:"passed"`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	// Tests are the gate's test counts ("" when its runner reported
	// none); Inventory says whether ralph read them test by test.
	Tests     string `json:"tests,omitempty"`
	Inventory bool   `json:"inventory,omitempty"`
	// RedAtBase: the gate failed at the base too (it is never called
	// passed for that).
	RedAtBase bool `json:"red_at_base,omitempty"`
}

// FileStat is one changed file of a judged commit.
type FileStat struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// Judgement is the record of one claim judged.
type Judgement struct {
	Item      string    `json:"item"`
	Iteration int       `json:"iteration"`
	Attempt   int       `json:"attempt"`
	Time      time.Time `json:"time"`
	// Tree is the tree the gates judged (what lands), Parent the commit it
	// was built on when that was the branch's tip ("" when it was built
	// on a story ahead of it in the queue), Base the item's base.
	Tree   string `json:"tree,omitempty"`
	Parent string `json:"parent,omitempty"`
	Base   string `json:"base,omitempty"`
	// Landed is the commit on the target branch that holds it, once the
	// lander took it.
	Landed  string `json:"landed,omitempty"`
	Claimed bool   `json:"claimed"`
	Passed  bool   `json:"passed"`
	Summary string `json:"summary"`
	// Checks are the judge's checks in the order they ran; the first not
	// OK decided a failed verdict.
	Checks   []CheckResult `json:"checks,omitempty"`
	Gates    []GateRun     `json:"gates,omitempty"`
	Evidence []Evidence    `json:"evidence,omitempty"`
	// StillRed are tests and checks red at the base and still red: listed
	// with every verdict, never blamed on the item, never called passed.
	StillRed []TestRef `json:"still_red,omitempty"`
	// Lost are tests that passed at the base and do not now.
	Lost  []string   `json:"lost,omitempty"`
	Files []FileStat `json:"files,omitempty"`
	// Worker names who ran the gates that judged the tree when it is
	// named (a coordinator's run: a worker whose results stood for exactly
	// this tree, or the coordinator itself), "" for a local run. The
	// landed commit says the same in its Ralph-Judged-By trailer.
	Worker   string    `json:"worker,omitempty"`
	Contract *Contract `json:"contract,omitempty"`
}

// JudgedDir is the folder of the judgement logs under ralph's state
// folder (.ralph).
func JudgedDir(stateDir string) string { return filepath.Join(stateDir, "judged") }

// JudgedFile is item id's judgement log.
func JudgedFile(stateDir, id string) string {
	return filepath.Join(JudgedDir(stateDir), fileName(id)+".jsonl")
}

// fileName makes an item id safe as one file name (ids are dotted task
// ids or PRD story ids; anything else is escaped).
func fileName(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// Append adds j to its item's judgement log.
func Append(stateDir string, j Judgement) error {
	if err := os.MkdirAll(JudgedDir(stateDir), 0o700); err != nil {
		return err
	}
	return store.AppendJSONL(JudgedFile(stateDir, j.Item), j)
}

// Read returns item id's judgements, oldest first (none: an empty list).
// A torn last line (a crash while appending) is skipped.
func Read(stateDir, id string) ([]Judgement, error) {
	var out []Judgement
	err := store.ReadJSONL(JudgedFile(stateDir, id), func(_ int, raw []byte) error {
		var j Judgement
		if json.Unmarshal(raw, &j) == nil {
			out = append(out, j)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// Last is item id's newest judgement, or nil.
func Last(stateDir, id string) *Judgement {
	js, _ := Read(stateDir, id)
	if len(js) == 0 {
		return nil
	}
	return &js[len(js)-1]
}
