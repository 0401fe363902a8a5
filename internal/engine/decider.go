package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Decider is one rule with a say in an item's iterations besides the
// gates: plan approval, a review the item is held for, the council,
// test-fix re-runs (internal/decide has them). The engine asks its
// deciders in order and never which one is which: in the setup step the
// first whose Turn claims the item's next iteration names its role; in
// the decide step the first whose Decision is not Next decides.
type Decider interface {
	// Turn claims the next iteration on an item whose role no source
	// fixed (it.Role ""), or says nothing (ok false: the role triggers
	// choose). It writes nothing: the dry run asks it too.
	Turn(it *Item, is ItemState) (t Turn, ok bool, err error)
	// Decide is asked once the iteration is verified, with its verdict.
	Decide(ctx context.Context, x View, v Verdict) (Decision, error)
}

// View is what a decider sees of an iteration, and what it may do within
// it (an *Iteration is one): the iteration's facts, its item's record,
// the run's clock and files, its events and progress, agent runs of its
// own. A decider reads no more of the engine, so a test gives it a View
// of its own making.
type View interface {
	// Facts are what the iteration is and what its agent did.
	Facts() Facts
	// Record is the item's record as it is now.
	Record() ItemState
	// RoleEnv is what a trigger or council condition sees of the item.
	RoleEnv() roles.Env
	// Why says where a trigger that held is written.
	Why(t *roles.Trigger) string
	// MaxAttempts is the item's attempt cap.
	MaxAttempts() int
	// ItemDir is a folder of ralph's own for the item: .ralph/<kind>/<item>.
	ItemDir(kind string) string
	// Paths are the run's files; RunID names the run.
	Paths() Paths
	RunID() string
	// Now is the run's clock.
	Now() time.Time
	// CommitsSince counts the commits on the iteration's tree since base.
	CommitsSince(ctx context.Context, base string) (int, error)
	// Emit records an event of the run.
	Emit(ev Event)
	// Note appends an entry to the progress file.
	Note(entry string)
	// RunAgent runs an agent within the iteration (a council member).
	RunAgent(ctx context.Context, r AgentRun) (AgentRan, error)
}

// Facts are what an iteration is and what its agent did, as deciders
// read them.
type Facts struct {
	Item      *Item
	Iteration int
	Attempt   int
	// Planning: the iteration writes the item's plan; StartHead is the
	// commit its tree was at when it began.
	Planning  bool
	StartHead string
	// BaseHead is the commit the item's attempt started from; Shared: the
	// iteration works in a tree other items use too (no worktree of its
	// own).
	BaseHead string
	Shared   bool
	// Result is how the agent's run ended; Rejected holds a role's
	// findings when it did not approve; RoleVerdict is what the role said.
	Result      agent.Result
	Rejected    string
	RoleVerdict roles.Decision
	// Files are the paths the iteration changed.
	Files []string
}

// Turn is an iteration a decider claims: its role and why, and what its
// prompt and agent get besides the role's own text.
type Turn struct {
	Role string // "" claims a plain worker iteration (no trigger is asked)
	Why  string
	Text string   // the role text, when not the role's own
	Env  []string // added to the agent's environment
	// Planning: the iteration writes the item's plan and changes no
	// code; the source does not verify it, its decider judges it.
	Planning bool
}

// Action is what a decision makes of an iteration.
type Action int

const (
	// next: no word; the next decider is asked. When none has a word a
	// verdict that passed is committed, and one that did not spends an
	// attempt (or none, for work in progress).
	next Action = iota
	// Hold: the item waits, no attempt spent — for a role's approval or
	// a person's word on its plan.
	Hold
	// Rerun: the item runs again within the same attempt.
	Rerun
	// Fail: the claim failed with the decision's findings as the next
	// iteration's context.
	Fail
)

// Decision is a decider's word on an iteration; the persist step records
// it. Hold and Rerun keep the item pending with Result as its last
// result; Fail spends an attempt with Verdict.
type Decision struct {
	Action Action
	// Verdict replaces the iteration's (Fail); Findings are what the next
	// iteration must address, as a role's rejection.
	Verdict  Verdict
	Findings string
	// Status heads the iteration's progress entry and Progress sums it
	// up ("" = the verdict's summary); Result is the item's last result
	// (Hold, Rerun); Log is the transcript's closing line; Events are
	// emitted once the decision is recorded.
	Status   string
	Progress string
	Result   string
	Log      string
	Events   []Event
	// Record writes the decider's own fields of the item's record.
	Record func(is *ItemState)
}

// Facts are the iteration's, as deciders read them.
func (x *Iteration) Facts() Facts {
	return Facts{Item: x.Item, Iteration: x.Current.Iteration, Attempt: x.Current.Attempt, Planning: x.Current.Planning, StartHead: x.Current.StartHead,
		BaseHead: x.Current.BaseHead, Shared: !x.Workspace.Isolated,
		Result: x.Attempt.Result, Rejected: x.Attempt.Rejected, RoleVerdict: x.RoleVerdict, Files: x.Files}
}

// Record is the item's record as it is now.
func (x *Iteration) Record() ItemState {
	var is ItemState
	x.e.box.read(func(st *State) {
		if s := st.Items[x.Item.ID]; s != nil {
			is = *s
		}
	})
	return is
}

// RoleEnv is what a trigger or council condition sees of the item now.
func (x *Iteration) RoleEnv() roles.Env {
	return x.e.roleEnv(x.Item, x.e.box.snapshot(), x.Current.Iteration)
}

// Why says where a trigger that held is written.
func (x *Iteration) Why(t *roles.Trigger) string { return x.e.triggerWhy(t) }

// MaxAttempts is the item's attempt cap.
func (x *Iteration) MaxAttempts() int { return x.e.maxAttempts(x.Item) }

// ItemDir is a folder of ralph's own for the item: .ralph/<kind>/<item>.
func (x *Iteration) ItemDir(kind string) string {
	return filepath.Join(x.e.cfg.Paths.Dir, kind, safeFileName(x.Item.ID))
}

// Now is the run's clock.
func (x *Iteration) Now() time.Time { return x.e.cfg.Clock.Now().UTC() }

// Paths are the run's files.
func (x *Iteration) Paths() Paths { return x.e.cfg.Paths }

// CommitsSince counts the commits on the iteration's tree since base.
func (x *Iteration) CommitsSince(ctx context.Context, base string) (int, error) {
	return x.e.cfg.Git.CommitsSince(ctx, x.Attempt.Dir, base)
}

// Emit records an event of the run.
func (x *Iteration) Emit(ev Event) { x.e.emit(ev) }

// Note appends an entry to the progress file.
func (x *Iteration) Note(entry string) { x.e.logProgress([]byte(strings.TrimRight(entry, "\n"))) }

// AgentRun is an agent run a decider makes within an iteration (a council
// member): its own role, prompt file and transcript in the item's tree.
type AgentRun struct {
	Role   string
	Label  string // names its prompt file and transcript, and tells scripts it apart (ITEM#label)
	Title  string // its transcript's header, after the item
	Run    int    // which run of the label's kind (the request's attempt)
	Prompt string
	Env    []string
}

// AgentRan is how an AgentRun went. Err is the agent's own failure (the
// run is over either way); Log is its transcript (at Transcript), open
// for the decider's last word: the decider closes it.
type AgentRan struct {
	Agent      AgentChoice
	Result     agent.Result // masked
	Err        error
	Log        io.WriteCloser
	Transcript string
}

// RunAgent runs the agent the roles give r.Role, with the iteration's
// environment and r's own prompt file and transcript. A cancelled run is
// an error; so is a role or agent that cannot be had.
func (x *Iteration) RunAgent(ctx context.Context, r AgentRun) (AgentRan, error) {
	e := x.e
	it, cur := x.Item, x.Current
	choice, err := e.agentFor(it, r.Role)
	if err != nil {
		return AgentRan{}, usage.Errorf("%v", err)
	}
	tr, err := e.openTranscript(cur.Iteration, it.ID, r.Label)
	if err != nil {
		return AgentRan{}, err
	}
	pf := filepath.Join(e.cfg.Paths.Dir, "prompts", safeFileName(it.ID)+"."+r.Label+".md")
	if err := writeFile(pf, r.Prompt); err != nil {
		tr.Close()
		return AgentRan{}, err
	}
	fmt.Fprintf(tr, "# ralph iteration %d · %s %s · %s · agent %s\n# started %s\n\n## Prompt\n\n%s\n\n## Agent output\n\n",
		cur.Iteration, it.Kind, it.ID, r.Title, choice.Name, x.Now().Format(time.RFC3339), r.Prompt)
	res, err := e.runAside(ctx, x, aside{role: r.Role, label: r.Label, agent: choice, prompt: r.Prompt, promptFile: pf, log: tr, runs: r.Run, env: r.Env})
	if ctx.Err() != nil {
		fmt.Fprintf(tr, "\n[ralph] interrupted\n")
		tr.Close()
		return AgentRan{}, ctx.Err()
	}
	return AgentRan{Agent: choice, Result: res, Err: err, Log: tr, Transcript: tr.Path}, nil
}

// aside is an agent run within an iteration besides its own: a conflict
// resolver, a council member.
type aside struct {
	role, label        string
	agent              AgentChoice
	prompt, promptFile string
	log                *Transcript
	runs               int
	env                []string
}

// runAside runs a in the iteration's tree: it takes the item's agent slot
// again if the item gave it up, waits out a rate limit, and gets the same
// request (environment, timeout) as the iteration's own agent. What it
// spent counts for the item; its result comes back masked.
func (e *Engine) runAside(ctx context.Context, x *Iteration, a aside) (agent.Result, error) {
	give, err := e.slots.retake(ctx, x.Item.ID)
	if err != nil {
		return agent.Result{}, err
	}
	defer give()
	if err := e.waitForRateLimit(ctx); err != nil {
		return agent.Result{}, err
	}
	s := iterSetup{Item: x.Item, Iteration: x.Current.Iteration, Attempt: x.Current.Attempt, Runs: a.runs, Agent: a.agent}
	req := e.request(s, x.Attempt.Dir, a.prompt, a.role, e.runID())
	req.ItemID, req.PromptFile, req.Transcript = x.Item.ID+"#"+a.label, a.promptFile, a.log
	for i, kv := range req.Env {
		if strings.HasPrefix(kv, "RALPH_PROMPT_FILE=") {
			req.Env[i] = "RALPH_PROMPT_FILE=" + a.promptFile
		}
	}
	req.Env = append(req.Env, a.env...)
	res, err := a.agent.Agent.Run(ctx, req)
	if err != nil {
		return res, err
	}
	res = e.masked(res)
	_ = e.box.update(func(st *State) { st.addUsage(x.Item.ID, res.Usage) })
	return res, nil
}

// writeFile writes a derived file (a prompt: the transcript has it too),
// making its folder; no fsync. It replaces the file by rename, so a link
// left in its place is replaced, never written through.
func writeFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return store.WriteFileNoSync(path, []byte(text), 0o600)
}
