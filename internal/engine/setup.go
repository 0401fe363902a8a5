package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/usage"
)

// iterSetup is what one iteration on an item is before it starts: its
// numbers, role and prompt, derived from the state and the config with
// every default applied. Run, Step and the dry run all take it from
// setup, so they never disagree.
type iterSetup struct {
	Item          *Item
	Iteration     int
	Attempt       int
	MaxAttempts   int
	MaxIterations int
	Runs          int // agent starts on the item so far, this one included
	Role          string
	RoleWhy       string   // what chose Role
	Planning      bool     // the iteration writes the item's plan (see Turn)
	Env           []string // the role's additions to the agent's environment
	Agent         AgentChoice
	Data          PromptData
	Prompt        string
}

// setup is the setup step of iteration number iteration on it, from st
// (read only): its numbers, its role (turn), the agent for that role and
// the prompt.
func (e *Engine) setup(it *Item, st *State, iteration int) (iterSetup, error) {
	cfg := &e.cfg
	var is ItemState
	if r := st.Items[it.ID]; r != nil {
		is = *r
	}
	s := iterSetup{Item: it, Iteration: iteration, Attempt: is.Attempts + 1, MaxAttempts: e.maxAttempts(it),
		MaxIterations: st.MaxIterations, Runs: is.Runs + 1}
	info := e.info()
	d := PromptData{
		Kind: it.Kind, PRDPath: info.PRDPath, TasksPath: info.TasksPath, ProgressPath: cfg.Paths.Progress,
		Branch: it.Branch, ItemID: it.ID, Title: it.Title, Description: it.Description, Criteria: it.Criteria,
		Iteration: iteration, MaxIterations: s.MaxIterations, Attempt: s.Attempt, MaxAttempts: s.MaxAttempts,
		Promise: cfg.Prompt.Promise, Progress: e.mem.digest(cfg.Paths.Progress),
		RetryContext: is.LastFailure, Guidance: e.guidanceFor(it.ID),
		Questions: e.questionsFor(it.ID, st.RunID), AskTimeout: cfg.Limits.AskTimeout,
	}
	if f := cfg.Progress.InRepo; f != "" {
		d.ProgressPath, d.RepoProgress = f, f
		d.Progress = e.mem.digestRepo(filepath.Join(cfg.Paths.Root, f))
	}
	if f := cfg.Progress.AgentsFile; f != "" {
		d.AgentsFile = f
		d.Progress = e.mem.digestAgents(filepath.Join(cfg.Paths.Root, f), f, cfg.Paths.Progress)
	}
	d.RunIteration = iteration
	if it.Kind == "stage" {
		// A stage's prompt counts the stage's own loop.
		d.Stage = it.ID
		d.Iteration, d.MaxIterations = s.Attempt, s.MaxAttempts
	}
	if it.Promise != "" {
		d.Promise = it.Promise
	}
	if it.Template != "" {
		d.Description = renderItemTemplate(it, d)
	}
	t, err := e.turn(it, st, is, iteration)
	if err != nil {
		return s, usage.Errorf("%v", err)
	}
	text := t.Text
	if text == "" && t.Role != "" {
		if text, err = cfg.Roles.Text(t.Role); err != nil {
			return s, usage.Errorf("%v", err)
		}
	}
	if is.Plan == PlanApproved && !t.Planning {
		d.Description += e.approvedPlan(it)
	}
	s.Role, s.RoleWhy, s.Planning, s.Env = t.Role, t.Why, t.Planning, t.Env
	if s.Agent, err = e.agentFor(it, t.Role); err != nil {
		return s, usage.Errorf("%v", err)
	}
	d.Role = s.Role
	s.Data = d
	if s.Prompt, err = buildPrompt(e.tmplFrom, e.template, text, d); err != nil {
		return s, usage.Errorf("%v", err)
	}
	return s, nil
}

// turn is the role of the next iteration on it, and why: the source's
// when it fixes one, else the first decider's that claims the iteration
// (the planner, a held item's reviewer, a test-fix re-run), else the first
// trigger's that holds.
func (e *Engine) turn(it *Item, st *State, is ItemState, iteration int) (Turn, error) {
	if it.Role != "" {
		return Turn{Role: it.Role, Why: it.RoleWhy, Text: it.RoleText}, nil
	}
	for _, d := range e.cfg.Deciders {
		if t, ok, err := d.Turn(it, is); err != nil || ok {
			return t, err
		}
	}
	t, err := e.cfg.Roles.Choose(e.roleEnv(it, st, iteration), false)
	if err != nil || t == nil {
		return Turn{}, err
	}
	return Turn{Role: t.Role, Why: e.triggerWhy(t)}, nil
}

func (e *Engine) triggerWhy(t *roles.Trigger) string {
	return fmt.Sprintf("%s (%s:%d)", t.Condition, relTo(e.cfg.Paths.Root, e.cfg.Roles.TriggersFrom), t.Line)
}

// roleEnv is what a trigger condition sees for the next iteration on it.
func (e *Engine) roleEnv(it *Item, st *State, iteration int) roles.Env {
	var is ItemState
	if s := st.Items[it.ID]; s != nil {
		is = *s
	}
	return roles.Env{
		Iteration: iteration, ItemIteration: is.Runs + 1, Attempt: is.Attempts + 1, ItemKind: it.Kind,
		TaskID: it.ID, TaskTitle: it.Title, BranchCommits: is.Commits, FilesChanged: is.FilesChanged,
		LastIterationFailed: is.LastFailed, ConsecutiveFailures: is.Failures, LastRole: is.Role,
		GateFailed: func(name string) bool { return slices.Contains(is.FailedGates, name) },
		IterationsSinceRole: func(role string) int {
			return iteration - 1 - st.RoleLast[role] // never served: every iteration so far
		},
	}
}

// AgentChoice is the agent that runs one iteration and why it is that one.
type AgentChoice struct {
	Agent agent.Agent
	Name  string
	Model string
	From  string // where the choice came from ("" for the run's agent)
}

// defaultAgent is the run's own agent.
func (e *Engine) defaultAgent() AgentChoice {
	return AgentChoice{Agent: e.cfg.Agent.Default, Name: e.cfg.Agent.Name, Model: e.cfg.Agent.Model}
}

// agentFor chooses the agent of an iteration on it with role.
func (e *Engine) agentFor(it *Item, role string) (AgentChoice, error) {
	if e.cfg.Agent.For == nil {
		return e.defaultAgent(), nil
	}
	c, err := e.cfg.Agent.For(it, role)
	if err != nil {
		return c, err
	}
	if c.Agent == nil {
		d := e.defaultAgent()
		d.From = c.From
		return d, nil
	}
	return c, nil
}

// renderItemTemplate fills an item's own prompt text; a template that does
// not render is shown as written, with the reason, rather than failing the
// iteration (the stage's file was validated when it was loaded).
func renderItemTemplate(it *Item, d PromptData) string {
	t, err := template.New(it.ID).Option("missingkey=error").Parse(it.Template)
	var b strings.Builder
	if err == nil {
		err = t.Execute(&b, d)
	}
	if err != nil {
		return it.Template + "\n\n(ralph could not fill in this template: " + err.Error() + ")"
	}
	return strings.TrimSpace(b.String())
}

// request is the agent request of an iteration. Every agent ralph starts —
// worker, conflict resolver, council member — gets the same environment
// from here.
func (e *Engine) request(s iterSetup, dir, prompt, role, runID string) agent.Request {
	cfg := &e.cfg
	it := s.Item
	pf := e.promptFile(it.ID)
	env := append(append([]string{}, cfg.Agent.Env...),
		"RALPH_PROMPT_FILE="+pf, "RALPH_ITEM_ID="+it.ID, "RALPH_STORY_ID="+it.ID,
		fmt.Sprintf("RALPH_ITERATION=%d", s.Iteration), fmt.Sprintf("RALPH_ATTEMPT=%d", s.Attempt),
		"RALPH_WORK_DIR="+dir, "RALPH_STATE_DIR="+cfg.Paths.Dir, "RALPH_RUN_ID="+runID)
	if role != "" {
		env = append(env, "RALPH_ROLE="+role)
	}
	env = append(env, s.Env...)
	return agent.Request{
		Prompt: prompt, PromptFile: pf, Dir: dir, Model: s.Agent.Model, Role: role, Env: env,
		Timeout: cfg.Limits.IterationTimeout, ItemID: it.ID, Iteration: s.Iteration, Attempt: s.Runs,
	}
}

// promptFile is where an iteration's prompt is written ($RALPH_PROMPT_FILE).
// Parallel workers each get their own, .ralph/prompts/<item>.md, so that
// one worker's prompt (or its agent's output file beside it) never
// replaces another's.
func (e *Engine) promptFile(item string) string {
	if e.cfg.Parallel <= 1 {
		return e.cfg.Paths.PromptFile
	}
	return filepath.Join(e.cfg.Paths.Dir, "prompts", safeFileName(item)+".md")
}

// decideStop is the one decision whether the loop stops instead of
// starting next, and why. It is asked before every start, by the scheduler
// and by the Stop-hook driver alike. next is the item the source offers
// (nil when none is ready) and running how many iterations are under way.
// "" means go on: start next, or wait for the running ones (or, when
// watching, for new work). It changes nothing: the caller that acts on
// StatusStopped removes the stop file.
func (e *Engine) decideStop(ctx context.Context, st *State, next *Item, running int) (status, reason string) {
	cfg := &e.cfg
	if ctx.Err() != nil {
		return StatusInterrupted, "interrupted (SIGINT)"
	}
	if f := cfg.Paths.stopRequested(); f != "" {
		return StatusStopped, fmt.Sprintf("stop requested (%s)", relTo(cfg.Paths.Root, f))
	}
	if cfg.Limits.MaxCost > 0 && st.Usage.CostUSD >= cfg.Limits.MaxCost {
		return StatusBudget, fmt.Sprintf("budget: cost $%.4f reached --max-cost $%.4f", st.Usage.CostUSD, cfg.Limits.MaxCost)
	}
	if tok := st.Usage.InputTokens + st.Usage.OutputTokens; cfg.Limits.MaxTokens > 0 && tok >= cfg.Limits.MaxTokens {
		return StatusBudget, fmt.Sprintf("budget: %d tokens reached --max-tokens %d", tok, cfg.Limits.MaxTokens)
	}
	if next == nil {
		if running > 0 || cfg.Watch > 0 || len(e.asking(st.RunID).waiting) > 0 {
			return "", "" // (an item waits for an answer: the run waits with it)
		}
		kind := e.info().ItemKind
		if w := Waiting(st); len(w) > 0 {
			var plans []string
			for _, id := range w {
				plans = append(plans, fmt.Sprintf("%s (%s)", id, relTo(cfg.Paths.Root, PlanFile(cfg.Paths, id))))
			}
			return StatusAwaitingApproval, fmt.Sprintf("%s waiting for plan approval: %s; `ralph approve ID` or `ralph reject ID --reason …`, then `ralph run` goes on",
				Plural(len(w), kind), strings.Join(plans, ", "))
		}
		passed, blocked, total := st.Counts()
		marked := st.Marked()
		if passed+len(marked) == total {
			if u, ok := cfg.Source.(unfinished); ok {
				if why := u.Unfinished(st); why != "" {
					return StatusBlocked, why
				}
			}
			if len(marked) > 0 {
				// Never "all passed" over marks nobody verified.
				return StatusUnverified, fmt.Sprintf("%d passed%s: %s", passed, MarkedCount(len(marked)), idList(marked))
			}
			return StatusComplete, fmt.Sprintf("all %s passed", Plural(total, kind))
		}
		return StatusBlocked, fmt.Sprintf("no %s can start: %d passed%s, %d blocked, %d waiting on blocked dependencies", kind, passed, MarkedCount(len(marked)), blocked, total-passed-len(marked)-blocked)
	}
	if st.Counted() >= st.MaxIterations {
		return StatusMaxIterations, fmt.Sprintf("max iterations (%d) reached with work left", st.MaxIterations)
	}
	if th := cfg.Limits.BreakerThreshold; th > 0 {
		if st.Breaker.SameCount >= th {
			// (the next start after the cool-down or a change is
			// half-open: halfOpen)
			return StatusBlocked, fmt.Sprintf("circuit breaker: the same failure %d times in a row (fix the cause, then `ralph run --reset-breaker` resumes)", st.Breaker.SameCount)
		}
		if st.Breaker.NoProgress >= 2*th {
			return StatusBlocked, fmt.Sprintf("circuit breaker: no item passed in %d iterations (fix the cause, then `ralph run --reset-breaker` resumes)", st.Breaker.NoProgress)
		}
	}
	return "", ""
}

// breakerOpen reports whether the circuit breaker's counts stop the run.
func (e *Engine) breakerOpen(st *State) bool {
	th := e.cfg.Limits.BreakerThreshold
	return th > 0 && (st.Breaker.SameCount >= th || st.Breaker.NoProgress >= 2*th)
}

// halfOpen makes an open breaker of a resumed run half-open when its
// cool-down has passed or a person changed what it was opened over (the
// gate commands, the tree, the config: Start.Fingerprint): its counts go
// to one short of opening, so one iteration runs; a pass closes it
// (markPassed), another failure opens it again. It returns why, or "".
func (e *Engine) halfOpen(ctx context.Context, st *State) string {
	if !e.breakerOpen(st) {
		return ""
	}
	b := &st.Breaker
	why := ""
	switch {
	case b.OpenedAt.IsZero():
		// Opened by a ralph that kept no time: a new start is the
		// person's move.
		why = "it opened in an earlier run"
	case e.cfg.Clock.Now().Sub(b.OpenedAt) >= e.cfg.Limits.BreakerCooldown:
		why = fmt.Sprintf("its cool-down (%s) has passed", e.cfg.Limits.BreakerCooldown)
	case e.cfg.Start.Fingerprint != nil && b.Fingerprint != "" && e.cfg.Start.Fingerprint(ctx) != b.Fingerprint:
		why = "the gate commands, the tree or the config changed since it opened"
	default:
		return ""
	}
	th := e.cfg.Limits.BreakerThreshold
	b.SameCount = min(b.SameCount, th-1)
	b.NoProgress = min(b.NoProgress, 2*th-1)
	b.OpenedAt, b.Fingerprint = time.Time{}, ""
	return why
}

// consumeStop removes the stop file once a driver has acted on it.
func (e *Engine) consumeStop(status string) {
	if status == StatusStopped {
		_ = os.Remove(e.cfg.Paths.Stop)
		if e.cfg.Paths.RootStop != "" {
			_ = os.Remove(e.cfg.Paths.RootStop)
		}
	}
}

// Plan is what the next iteration would be, computed exactly as a run
// computes it (`ralph run --dry-run`); making it writes nothing.
type Plan struct {
	Source       SourceInfo
	Items        int
	Item         *Item  // nil when nothing would start
	StopStatus   string // when Item is nil: how the run would end
	StopReason   string
	Resumed      bool // the run would resume the saved state
	TemplateFrom string
	Prompt       string
	Request      agent.Request // the agent request the run would make
	Role         string        // the next iteration's role ("" for none)
	RoleWhy      string        // the trigger that chose it
	Agent        AgentChoice   // the agent that would run it
}

// runIDPlaceholder stands for the run id in a Plan's environment.
const runIDPlaceholder = "<assigned when the run starts>"

// Plan computes the next iteration without running or writing anything.
func (e *Engine) Plan(ctx context.Context) (Plan, error) {
	st, resumed, _, err := e.initialState(ctx)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Source: e.info(), Items: st.Total(), Resumed: resumed, TemplateFrom: e.tmplFrom}
	e.applyDecisions(st) // on this copy only: nothing is written
	it, err := e.next(st, nil)
	if err != nil {
		return p, err
	}
	if p.StopStatus, p.StopReason = e.decideStop(ctx, st, it, 0); p.StopStatus != "" {
		return p, nil
	}
	if it == nil {
		return p, nil // watching: nothing ready yet
	}
	s, err := e.setup(it, st, st.Iteration+1)
	if err != nil {
		return p, err
	}
	runID := runIDPlaceholder
	if resumed {
		runID = st.RunID
	}
	p.Item, p.Prompt = it, s.Prompt
	p.Role, p.RoleWhy, p.Agent = s.Role, s.RoleWhy, s.Agent
	p.Request = e.request(s, e.cfg.Paths.Root, s.Prompt, s.Role, runID)
	return p, nil
}

// errNoAgent is Run without an agent.
var errNoAgent = errors.New("engine: Run needs an agent")
