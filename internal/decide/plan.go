package decide

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/roles"
)

// plannerRole is the role of an item's planning iteration.
const plannerRole = "planner"

// plan is --plan-approval: an item's first iteration writes a plan to
// engine.PlanFile and changes no code; the item then waits until a person
// approves the plan (ralph approve; the engine applies the decision and
// leaves waiting items out of selection), or at once with Auto. A rejected
// plan makes the item plan again.
type plan struct {
	On, Auto bool
	Roles    *roles.Set
	Paths    engine.Paths
}

// Turn claims every iteration of an item until its plan is approved.
func (p plan) Turn(it *engine.Item, is engine.ItemState) (engine.Turn, bool, error) {
	if !p.On || is.Plan == engine.PlanApproved {
		return engine.Turn{}, false, nil
	}
	why := "--plan-approval: the item's plan comes first and a person approves it"
	if is.PlanRev > 0 {
		why = "--plan-approval: the last plan was rejected; this iteration plans again"
	}
	text, err := p.Roles.Text(plannerRole)
	if err != nil {
		return engine.Turn{}, false, err
	}
	file := engine.PlanFile(p.Paths, it.ID)
	text = strings.TrimRight(text, "\n") + fmt.Sprintf("\n\nWrite the plan to this file (create it; it is the only file this iteration writes):\n\n    %s\n", file)
	return engine.Turn{Role: plannerRole, Why: why, Text: text, Env: []string{"RALPH_PLAN_FILE=" + file}, Planning: true}, true, nil
}

// Decide judges a planning iteration (the gates do not run on it): it
// must have written the plan and changed no code. A plan waits for
// approval, or is approved at once with Auto, and spends no attempt; a
// missing plan or changed code is a failed attempt with what went wrong
// as the next iteration's context.
func (p plan) Decide(ctx context.Context, x engine.View, v engine.Verdict) (engine.Decision, error) {
	f := x.Facts()
	it := f.Item
	if !f.Planning {
		return next, nil
	}
	if f.Result.Failed() {
		return engine.Decision{Action: engine.Fail, Verdict: engine.AgentFailure(f.Result)}, nil
	}
	plan := engine.PlanFile(x.Paths(), it.ID)
	commits := 0
	if f.StartHead != "" {
		commits, _ = x.CommitsSince(ctx, f.StartHead)
	}
	b, _ := os.ReadFile(plan)
	switch files := f.Files; {
	case len(files) > 0 || commits > 0:
		var what []string
		if len(files) > 0 {
			what = append(what, "changed "+strings.Join(files[:min(len(files), 10)], ", "))
		}
		if commits > 0 {
			what = append(what, fmt.Sprintf("made %s", engine.Plural(commits, "commit")))
		}
		return failPlan("the planning iteration changed code", fmt.Sprintf("A planning iteration changes no code, and this one %s. Undo that (git reset --hard %s; git clean -fd), then write only the plan to %s.", strings.Join(what, " and "), engine.ShortSHA(f.StartHead), plan)), nil
	case strings.TrimSpace(string(b)) == "":
		return failPlan("plan not written", fmt.Sprintf("No plan was written: write the plan to %s (and change nothing else).", plan)), nil
	}
	name := rel(x.Paths(), plan)
	rev := x.Record().PlanRev + 1
	d := engine.Decision{Action: engine.Hold, Progress: "plan " + name,
		Status: "plan written, waiting for approval", Result: "plan written; waiting for approval",
		Record: func(is *engine.ItemState) { is.PlanRev, is.Plan = rev, engine.PlanWaiting }}
	then := fmt.Sprintf("it waits for `ralph approve %s` or `ralph reject %s --reason …`; other items go on", it.ID, it.ID)
	if p.Auto {
		d.Status, d.Result = "plan written and approved (--auto-approve)", "plan written and approved (--auto-approve)"
		d.Record = func(is *engine.ItemState) { is.PlanRev, is.Plan = rev, engine.PlanApproved }
		then = "approved at once (--auto-approve)"
	}
	d.Log = fmt.Sprintf("%s: %s (%s)", it.ID, d.Status, name)
	d.Events = append(d.Events, event(x, "plan_written", fmt.Sprintf("%s: plan written to %s (plan %d); %s", it.ID, name, rev, then),
		map[string]any{"plan": plan, "rev": rev, "auto_approved": p.Auto}))
	if p.Auto {
		d.Events = append(d.Events, engine.Event{Type: "plan_approved", Iteration: f.Iteration, Item: it.ID, Message: fmt.Sprintf("%s: plan %s approved (--auto-approve); its work begins", it.ID, name)})
	}
	return d, nil
}

// failPlan fails a planning iteration with what it must do instead.
func failPlan(summary, problem string) engine.Decision {
	return engine.Decision{Action: engine.Fail, Verdict: engine.Verdict{Claimed: true, Summary: summary, Failure: problem}}
}
