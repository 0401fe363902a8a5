package engine

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// PlanFile is where an item's plan is written: .ralph/plans/<item>.md.
func PlanFile(p Paths, item string) string {
	return filepath.Join(p.Dir, "plans", safeFileName(item)+".md")
}

// decisionFile is where `ralph approve` and `ralph reject` leave their word
// on an item's plan for the run to apply.
func decisionFile(p Paths, item string) string {
	return filepath.Join(p.Dir, "plans", safeFileName(item)+".decision.json")
}

// PlanDecision is a person's word on one plan. Rev names the plan it was
// made on, so that a decision left behind never applies to a later plan.
type PlanDecision struct {
	Item    string    `json:"item"`
	Rev     int       `json:"rev"`
	Approve bool      `json:"approve"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// Seal proves that `ralph approve` or `ralph reject` made the decision
	// (see decision.go); a decision without it is never applied.
	Seal string `json:"seal"`
}

// DecidePlan records a decision on the plan item waits with (`ralph approve`,
// `ralph reject`). It reads the state without the run lock and writes only
// the decision file (atomically, sealed with the run's key); the run
// applies it before it next picks an item, or the next `ralph run` does.
// Asked from inside an iteration's process tree it refuses (decision.go).
func DecidePlan(p Paths, item string, approve bool, reason string, now time.Time) (PlanDecision, error) {
	st, _, err := LoadOrRebuildState(p)
	if err != nil {
		return PlanDecision{}, err
	}
	if st == nil {
		return PlanDecision{}, usage.Errorf("no ralph run in %s yet: nothing waits for approval", p.Root)
	}
	is := st.Items[item]
	if is == nil {
		return PlanDecision{}, usage.Errorf("%s is not an item of run %s (%s)", item, st.RunID, waitingList(st))
	}
	if err := refuseFromIteration(p, st, item, approve); err != nil {
		return PlanDecision{}, err
	}
	if is.Plan != PlanWaiting {
		what := "it has not written a plan yet"
		switch {
		case is.Status == ItemPassed:
			what = "it passed"
		case is.Plan == PlanApproved:
			what = "its plan is approved already"
		}
		return PlanDecision{}, usage.Errorf("%s does not wait for approval: %s (%s)", item, what, waitingList(st))
	}
	if !approve && strings.TrimSpace(reason) == "" {
		return PlanDecision{}, usage.Errorf("a rejection needs --reason: the next plan must answer it")
	}
	key, err := decisionKey(p, st.RunID)
	if err != nil {
		return PlanDecision{}, err
	}
	d := PlanDecision{Item: item, Rev: is.PlanRev, Approve: approve, Reason: strings.TrimSpace(reason), At: now.UTC()}
	d.Seal = d.seal(key)
	return d, store.WriteJSON(decisionFile(p, item), d)
}

// waitingList names the items that wait for approval in st.
func waitingList(st *State) string {
	w := Waiting(st)
	if len(w) == 0 {
		return "no item waits for approval"
	}
	return "waiting for approval: " + strings.Join(w, ", ")
}

// Waiting lists the items whose plans wait for approval, in item order.
func Waiting(st *State) []string {
	var out []string
	for id, is := range st.Items {
		if is.Plan == PlanWaiting && is.Status != ItemPassed && is.Status != ItemBlocked {
			out = append(out, id)
		}
	}
	pos := make(map[string]int, len(st.Order))
	for i, id := range st.Order {
		pos[id] = i
	}
	sort.Slice(out, func(i, j int) bool { return pos[out[i]] < pos[out[j]] })
	return out
}

// next is the source's next ready item, leaving out the items whose plans
// wait for approval and those whose questions wait for an answer: they
// are busy until a person decides or answers.
func (e *Engine) next(st *State, running map[string]bool) (*Item, error) {
	busy := running
	a := e.asking(st.RunID)
	if a.holdsTree != "" {
		return nil, nil // its work in the shared tree waits with it (ask.go)
	}
	if w := Waiting(st); len(w) > 0 || len(a.waiting) > 0 {
		busy = maps.Clone(running)
		if busy == nil {
			busy = make(map[string]bool, len(w)+len(a.waiting))
		}
		for _, id := range w {
			busy[id] = true
		}
		for id := range a.waiting {
			busy[id] = true
		}
	}
	return e.cfg.Source.Next(st, busy)
}

// applyDecisions applies the decisions people left on waiting plans to st
// and returns the events to emit once st is saved. A decision on an
// earlier plan than the one waiting is ignored; a decision file that
// `ralph approve` or `ralph reject` did not seal is reported and removed.
func (e *Engine) applyDecisions(st *State) []Event {
	var evs []Event
	var key []byte
	for _, id := range Waiting(st) {
		is := st.Items[id]
		var d PlanDecision
		file := decisionFile(e.cfg.Paths, id)
		if err := store.ReadJSON(file, &d); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				evs = append(evs, Event{Type: "source_error", Item: id, Message: fmt.Sprintf("%s: reading the decision on its plan: %v", id, err)})
			}
			continue
		}
		if key == nil {
			var err error
			if key, err = decisionKey(e.cfg.Paths, st.RunID); err != nil {
				evs = append(evs, Event{Type: "source_error", Item: id, Message: fmt.Sprintf("%s: reading the decision on its plan: %v", id, err)})
				return evs
			}
		}
		if !d.sealed(key) {
			_ = os.Remove(file)
			evs = append(evs, Event{Type: "tamper_detected", Item: id, Message: fmt.Sprintf("%s: %s was not made by `ralph approve` or `ralph reject` (its seal does not match); ignored and removed: only a person decides on a plan", id, relTo(e.cfg.Paths.Root, file))})
			continue
		}
		if d.Rev != is.PlanRev || d.Item != id {
			continue
		}
		plan := relTo(e.cfg.Paths.Root, PlanFile(e.cfg.Paths, id))
		if d.Approve {
			is.Plan = PlanApproved
			is.LastResult = "plan approved"
			evs = append(evs, Event{Type: "plan_approved", Item: id, Message: fmt.Sprintf("%s: plan %s approved (ralph approve); its work begins", id, plan)})
			continue
		}
		is.Plan = ""
		is.LastResult = "plan rejected: " + oneLine(d.Reason, 200)
		is.LastFailure = fmt.Sprintf("Your plan (%s) was rejected: %s\n\nWrite a new plan that answers this.", plan, gate.Trim(d.Reason, 4<<10))
		evs = append(evs, Event{Type: "plan_rejected", Item: id, Message: fmt.Sprintf("%s: plan %s rejected (ralph reject): %s; it plans again", id, plan, oneLine(d.Reason, 200))})
	}
	return evs
}

// takeDecisions applies the decisions waiting in their files to the run's
// state, then reports them.
func (e *Engine) takeDecisions() {
	var waiting bool
	e.box.read(func(st *State) { waiting = len(Waiting(st)) > 0 })
	if !waiting {
		return
	}
	var evs []Event
	_ = e.box.update(func(st *State) { evs = e.applyDecisions(st) })
	for _, ev := range evs {
		e.emit(ev)
	}
}

// approvedPlan is the text an item's work iterations get once its plan is
// approved.
func (e *Engine) approvedPlan(it *Item) string {
	b, err := os.ReadFile(PlanFile(e.cfg.Paths, it.ID))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("\n\n## The approved plan\n\nA person approved this plan (%s); carry it out:\n\n%s", relTo(e.cfg.Paths.Root, PlanFile(e.cfg.Paths, it.ID)), gate.Trim(strings.TrimSpace(string(b)), 16<<10))
}

// readyPlanFile makes the folder a planning iteration writes its plan in,
// and keeps the plan it is about to replace (a rejected one) as
// <item>.<rev>.rejected.md, so that the new plan is known to be new.
// It also makes the run's decision key before the first planner runs, so
// that no agent gets to make it first.
func (e *Engine) readyPlanFile(it *Item, rev int) error {
	if _, err := decisionKey(e.cfg.Paths, e.runID()); err != nil {
		return err
	}
	p := PlanFile(e.cfg.Paths, it.ID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	if rev == 0 {
		// No plan was ever judged: this is what a crashed planner left.
		return os.Remove(p)
	}
	return os.Rename(p, strings.TrimSuffix(p, ".md")+fmt.Sprintf(".%d.rejected.md", rev))
}
