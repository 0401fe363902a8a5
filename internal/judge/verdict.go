package judge

import (
	"fmt"
	"strings"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/land"
)

// Verdict is the judgement of one iteration: what the engine decides on.
type Verdict struct {
	Passed  bool
	Claimed bool
	// Unproven: the claim met every check but the evidence one (a role a
	// person named may still approve it: the item's Review).
	Unproven bool
	Gates    []gate.Result
	Summary  string // one line for output and state
	Failure  string // retry context for the next prompt (empty on pass)
	Tampered []string
	// Tree is the tree the gates judged: what lands, on Ticket's place in
	// the lander's queue (nil when nothing is to land).
	Tree   string
	Ticket *land.Ticket
	// Message is the commit message the item's commit lands with; its
	// "Verified by ralph" line names the evidence.
	Message  string
	Evidence []Evidence
	// StillRed are the tests and gates red at the base and still red on
	// a passing commit: not this item's, never called passed.
	StillRed []string
	// Files are the paths the item's work changed (from its base).
	Files []string
	// Conflict: the work does not merge onto the branch as it is; a
	// resolver iteration may fix it in the item's tree.
	Conflict *Conflict
	// Snapshot holds the index the tree was recorded in: after the
	// commit lands, the work tree it was recorded from takes it as its
	// own index (a sequential run's main tree).
	Snapshot *git.Snapshot
	// Judgement is what was appended to the item's judgement log.
	Judgement *Judgement
}

// Conflict is work that does not merge onto the branch's end.
type Conflict struct {
	Paths   []string
	Context string
}

// AgentFailure renders a failed agent run as a verdict (no gates run: the
// run itself did not finish).
func AgentFailure(r agent.Result) Verdict {
	what := fmt.Sprintf("agent exited with code %d", r.ExitCode)
	if r.TimedOut {
		what = "agent timed out and was killed"
	}
	msg := what
	if r.ErrorText != "" {
		msg += ": " + r.ErrorText
	}
	return Verdict{Summary: what, Failure: "The previous agent run did not finish: " + gate.Trim(msg, 2000)}
}

// Rejection is the verdict on an iteration whose role did not approve:
// a failed claim, with the findings as the next iteration's context.
func Rejection(role, findings string) Verdict {
	return Verdict{Claimed: true, Summary: "the " + role + " asked for changes",
		Failure: "The " + role + " reviewed the work and did not approve it. Address these findings:\n\n" + gate.Trim(findings, 4<<10)}
}

// fail is a failed claim's verdict.
func fail(summary, failure string) *Verdict {
	return &Verdict{Claimed: true, Summary: summary, Failure: failure}
}

// list joins names for a message, naming at most max of them.
func list(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
}
