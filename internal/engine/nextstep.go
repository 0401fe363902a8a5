package engine

import (
	"fmt"
	"strings"
)

// NextStep is what a person does about a run that stopped, naming the
// command: the same words at the end of the run, in `ralph status` (text
// and JSON) and on the dashboard. "" while the run goes on, when it is
// complete, or when its stop reason already says (plans to approve).
func (st *State) NextStep() string {
	kind := itemKind(st.Source)
	blocked := len(st.Blocked())
	switch st.Status {
	case StatusComplete, StatusAwaitingApproval, StatusAwaitingAnswer, StatusRunning:
		return ""
	case StatusBlocked:
		if strings.HasPrefix(st.StopReason, "circuit breaker") {
			return "the circuit breaker stopped the run: fix the cause (see `ralph log`), then `ralph run --reset-breaker` continues; `ralph run --fresh` starts a new run"
		}
		if blocked > 0 {
			return "`ralph retry` reopens the blocked " + pluralWord(blocked, kind) + " with attempts reset (`ralph retry ID` for one), then `ralph run` continues; `ralph run --fresh` starts a new run; their work is kept on ralph/blocked/… branches (`ralph clean` removes old ones)"
		}
		return "`ralph run --fresh` starts a new run"
	case StatusUnverified:
		return verifyMarks(st.Source) + "; `ralph run --trust-marks` counts the marks as passed"
	case StatusMaxIterations, StatusBudget:
		return "`ralph run` with a higher limit (--max-iterations, --max-cost, --max-tokens) continues the run"
	}
	return "`ralph run` resumes the run"
}

// MarksWorked reports whether a source (State.Source) offers its items
// marked by hand as work, so that an agent verifies them: a PRD or a
// plan does; a task tree's archive is append-only, so an archived task
// is never worked on.
func MarksWorked(source string) bool { return source != "tasks" }

// itemKind is what an item of a source (State.Source) is called.
func itemKind(source string) string {
	if kind := map[string]string{"prd": "story", "tasks": "task", "pipeline": "stage"}[source]; kind != "" {
		return kind
	}
	return "item"
}

// verifyMarks says how a person has ralph verify an item of a source
// (State.Source) that is marked done by hand.
func verifyMarks(source string) string {
	kind := itemKind(source)
	if !MarksWorked(source) {
		return "to have ralph verify a task " + MarkedLabel + ", add it again as a new task (`ralph task add`)"
	}
	return "`ralph run` has an agent verify each " + kind + " " + MarkedLabel + " (it passes only on evidence)"
}

// pluralWord is Plural without the count.
func pluralWord(n int, word string) string {
	s := Plural(n, word)
	return s[strings.IndexByte(s, ' ')+1:]
}

// AttemptsUsed is the attempts an item has used in this run: its failed
// ones, and the one that passed (a story that passed at once used 1, not
// 0). An item that was done before the run began (passes: true in the
// PRD, an archived task) used none. Every surface counts attempts
// through it: ralph status, the dashboards, MCP.
func (is *ItemState) AttemptsUsed() int {
	if is.Status == ItemPassed {
		if is.PassedBefore() {
			return 0
		}
		return is.Attempts + 1
	}
	return is.Attempts
}

// PassedBefore reports whether the item was done before this run began:
// passed, and no iteration of the run worked on it or committed it.
func (is *ItemState) PassedBefore() bool {
	return is.Status == ItemPassed && is.untouched()
}

// untouched: no iteration of the run worked on the item or committed it.
func (is *ItemState) untouched() bool {
	return is.Runs == 0 && len(is.Iterations) == 0 && is.Commit == ""
}

// AttemptsOf is the item's attempts for people, "1/3" (used of the run's
// limit), or "—" for an item done (or marked done) before the run.
func (is *ItemState) AttemptsOf(limit int) string {
	if is.Done() && is.untouched() {
		return "—"
	}
	return fmt.Sprintf("%d/%d", is.AttemptsUsed(), limit)
}
