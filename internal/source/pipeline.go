package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/pipeline"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Pipeline runs the stages of a pipeline file in order on the current
// branch: a stage passes when its exit condition holds in the tree, and
// its work is committed as one commit. The harness keeps the pipeline it
// loaded at start; an agent editing .ralph/pipeline.yaml changes nothing.
type Pipeline struct {
	P       *pipeline.Pipeline
	File    string // absolute path of the pipeline file, or "<preset> (built-in)"
	Root    string // repository root: condition paths are relative to it
	Git     *git.Repo
	Runner  proc.Runner   // runs command conditions
	Timeout time.Duration // per command condition; 0 = 10 minutes
	PRDPath string        // absolute; "" when the pipeline names no PRD
	// StatePath is the pipeline's own state file (.ralph/pipeline.json:
	// current stage, per-stage iteration counts), a mirror derived from
	// the engine's state.
	StatePath string
	// ToolStatePath, for the pagent pipeline, is where pagent keeps its
	// state (.claude/pagent-pipeline.json, the same fields): tools
	// written for pagent read it there.
	ToolStatePath string
	excludeErr    error

	// branch is the branch the run works on (checked out when it began).
	branch string
}

// OpenPipeline loads spec: a pipeline file, or the name of a built-in
// preset ("pagent") when no such file exists. The PRD it names must exist.
func OpenPipeline(spec, root string, repo *git.Repo, runner proc.Runner, timeout time.Duration) (*Pipeline, error) {
	var p *pipeline.Pipeline
	var file string
	var err error
	if _, serr := os.Stat(spec); serr != nil && pipeline.IsPreset(spec) {
		if p, err = pipeline.LoadPreset(spec, "", root); err != nil {
			return nil, err
		}
		file = p.File
		if _, serr := os.Stat(filepath.Join(root, p.PRD)); serr != nil {
			return nil, usage.Errorf("the built-in %s pipeline reads its PRD from %s, which does not exist: write the pipeline out with `ralph pipeline init %s --prd YOUR-PRD.md`, then run it with --pipeline .ralph/pipeline.yaml", spec, p.PRD, spec)
		}
	} else {
		file, err = filepath.Abs(spec)
		if err != nil {
			return nil, err
		}
		if _, serr := os.Stat(file); serr != nil {
			return nil, usage.Errorf("pipeline file %s does not exist (create one with `ralph pipeline init pagent --prd FILE`; built in: %s)", spec, strings.Join(pipeline.Presets(), ", "))
		}
		p, err = pipeline.Load(file)
	}
	if err != nil {
		return nil, err
	}
	s := &Pipeline{P: p, File: file, Root: root, Git: repo, Runner: runner, Timeout: timeout,
		StatePath: filepath.Join(root, ".ralph", "pipeline.json")}
	if p.Name == "pagent" {
		s.ToolStatePath = filepath.Join(root, ".claude", "pagent-pipeline.json")
		// ralph's mirror, never the user's work (nor a stage's commit);
		// a failure stops the first stage (Prepare).
		s.excludeErr = repo.EnsureExcluded(context.Background(), "/.claude/pagent-pipeline.json")
	}
	if p.PRD != "" {
		s.PRDPath = p.PRD
		if !filepath.IsAbs(s.PRDPath) {
			s.PRDPath = filepath.Join(root, p.PRD)
		}
		if _, err := os.Stat(s.PRDPath); err != nil {
			return nil, usage.Errorf("pipeline %s: prd %s does not exist (paths are relative to the repository root %s)", p.Name, p.PRD, root)
		}
	}
	return s, nil
}

func (s *Pipeline) Info() engine.SourceInfo {
	return engine.SourceInfo{Kind: "pipeline", Path: s.File, ItemKind: "stage", PRDPath: s.PRDPath, Gated: true}
}

func (s *Pipeline) Items() []engine.Item {
	out := make([]engine.Item, 0, len(s.P.Stages))
	for i := range s.P.Stages {
		out = append(out, stageItem(&s.P.Stages[i]))
	}
	return out
}

// stageItem is a stage as the engine runs it: its own prompt template,
// its iteration cap (max_iterations; 0 means the run's --max-attempts) and,
// when its exit is a promise, that promise in the prompt's {{.Promise}}.
func stageItem(st *pipeline.Stage) engine.Item {
	it := engine.Item{ID: st.Name, Title: st.DisplayTitle(), Kind: "stage", Template: st.Template, MaxAttempts: st.MaxIterations,
		Criteria: []string{"Exit condition (checked by the harness): " + st.Exit.Describe()}}
	if ps := st.Exit.Promises(); len(ps) > 0 {
		it.Promise = ps[0]
	}
	return it
}

// Sync has nothing to do: stages change only through the engine.
// When a run resumes, a stage recorded as passed is believed only if its
// commit is in the history of the checked-out branch.
func (s *Pipeline) Sync(st *engine.State, why engine.SyncReason) error {
	if why != engine.SyncResume {
		return nil
	}
	ctx := context.Background()
	for _, is := range st.Items {
		if is.Status != engine.ItemPassed || is.Commit == "" {
			continue
		}
		if !s.Git.IsAncestor(ctx, is.Commit, "HEAD") {
			is.Status, is.Reason = engine.ItemPending, fmt.Sprintf("the saved state said passed (commit %q), but that commit is not in the branch's history; verified again", is.Commit)
			is.Commit, is.PassedAt = "", nil
		}
	}
	forgetLostBases(ctx, s.Git, st)
	return nil
}

// Next is the first stage that has not passed: stages are strictly
// ordered, so a blocked stage stops the pipeline.
func (s *Pipeline) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	for i := range s.P.Stages {
		stg := &s.P.Stages[i]
		is := st.Items[stg.Name]
		if is != nil && is.Status == engine.ItemPassed {
			continue
		}
		if (is != nil && is.Status == engine.ItemBlocked) || busy[stg.Name] {
			return nil, nil
		}
		it := stageItem(stg)
		return &it, nil
	}
	return nil, nil
}

// Prepare runs every stage in the repository root on the current branch.
func (s *Pipeline) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (engine.Workspace, error) {
	running := true
	for _, c := range st.Current {
		if c.Item == it.ID {
			running = false // resuming a verification: the run was counted
		}
	}
	if s.excludeErr != nil {
		return engine.Workspace{}, fmt.Errorf("listing .claude/pagent-pipeline.json in .git/info/exclude: %w", s.excludeErr)
	}
	if s.branch == "" {
		cur, err := s.Git.CurrentBranch(ctx)
		if err != nil {
			return engine.Workspace{}, err
		}
		if cur == "" {
			return engine.Workspace{}, usage.Errorf("the tree is on a detached HEAD: check out the branch the pipeline's commits should go on")
		}
		s.branch = cur
	}
	s.writeState(st, it.ID, "", running, "")
	return engine.Workspace{Dir: s.Git.Dir, Follow: s.follow}, nil
}

// follow brings the main tree along: what landed, with the index the
// work was recorded in.
func (s *Pipeline) follow(ctx context.Context, v engine.Verdict, old, landed string) error {
	return followTree(ctx, s.Git, v, landed)
}

// Terms: a stage has no gates; its exit condition is its acceptance,
// asked on the judged checkout (the files it names, the commands it runs)
// and on the agent's final message (a promise). A met condition is the
// stage's claim and its evidence.
func (s *Pipeline) Terms(it *engine.Item, st *engine.State) judge.Claim {
	title := it.Title
	if title == "" {
		title = it.ID
	}
	c := judge.Claim{Target: s.branch, Claimed: true, Subject: fmt.Sprintf("pipeline(%s): %s stage complete", it.ID, title),
		Trailers: itemTrailers(stageTrailer, it.ID, st.RunID)}
	if stg := s.P.Stage(it.ID); stg != nil {
		c.Commands = stg.Exit.Commands()
	}
	return c
}

// Claim gives the stage's terms and its exit condition over the attempt.
func (s *Pipeline) Claim(ctx context.Context, a *engine.Attempt, st *engine.State) judge.Claim {
	c := s.Terms(a.Item, st)
	c.Body = a.Learnings
	stg := s.P.Stage(a.Item.ID)
	if stg == nil {
		c.Refused = &engine.Verdict{Summary: "unknown stage", Failure: fmt.Sprintf("stage %s is not in %s", a.Item.ID, s.File)}
		return c
	}
	c.Condition = func(ctx context.Context, dir string) (bool, string, string) {
		env := pipeline.Env{Dir: dir, FinalText: a.Result.FinalText, Prompt: a.Prompt, Runner: s.Runner, Timeout: s.Timeout}
		if a.Log != nil {
			env.Log = a.Log
		}
		met, detail := stg.Exit.Eval(ctx, env)
		return met, stageFirstLine(detail), fmt.Sprintf("The %s stage's exit condition (%s) is not met yet: %s", stg.Name, stg.Exit.Describe(), detail)
	}
	return c
}

func stageFirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimRight(s[:i], ":")
	}
	return s
}

// Landed moves the pipeline's state file on.
func (s *Pipeline) Landed(_ context.Context, a *engine.Attempt, _ engine.Verdict, _ string, st *engine.State) error {
	s.writeState(st, "", a.Item.ID, false, "")
	return nil
}

// stageTrailer marks the commit that recorded a pipeline stage.
const stageTrailer = "Ralph-Stage"

// Recover reports whether a stage's commit landed before a crash.
func (s *Pipeline) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if sha := committedIn(ctx, s.Git, "HEAD", stageTrailer, it.ID, st.RunID); sha != "" {
		return sha, true, nil
	}
	return "", false, nil
}

// Block gives up on a stage after its attempts. Its unfinished work stays
// in the tree for a person to look at; the pipeline cannot go on past it.
func (s *Pipeline) Block(ctx context.Context, it *engine.Item, st *engine.State, reason string) error {
	s.writeState(st, "", "", false, fmt.Sprintf("stage %s blocked: %s", it.ID, reason))
	return nil
}

// Close rewrites the mirror with the run's final status and reason.
func (s *Pipeline) Close(st *engine.State) error {
	s.writeState(st, "", "", false, st.StopReason)
	return nil
}

// PipelineState is .ralph/pipeline.json: the current stage and each
// stage's iteration count, in the shape pipeline scripts expect. It is a
// mirror of the engine's state.json for people and scripts; ralph never
// reads it back.
type PipelineState struct {
	Pipeline   string         `json:"pipeline"`
	File       string         `json:"file"`
	RunID      string         `json:"run_id"`
	Stage      string         `json:"stage"` // current stage; "" when every stage passed
	StartedAt  time.Time      `json:"started_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	PRDFile    string         `json:"prd_file,omitempty"`
	PRDPath    string         `json:"prd_path,omitempty"`
	Iterations map[string]int `json:"iterations"`
	Stages     []StageState   `json:"stages"`
	Complete   bool           `json:"complete"`
	StopReason string         `json:"stop_reason,omitempty"`
}

// StageState is one stage in the mirror.
type StageState struct {
	Name          string `json:"name"`
	Title         string `json:"title"`
	Status        string `json:"status"`
	Iterations    int    `json:"iterations"`
	MaxIterations int    `json:"max_iterations,omitempty"`
	Exit          string `json:"exit"`
	Commit        string `json:"commit,omitempty"`
	LastResult    string `json:"last_result,omitempty"`
}

// writeState derives the mirror from st. starting is a stage whose
// iteration is about to run (counted already), passed one that is being
// accepted (passed already).
func (s *Pipeline) writeState(st *engine.State, starting, passed string, count bool, stop string) {
	ps := PipelineState{Pipeline: s.P.Name, File: s.File, RunID: st.RunID, StartedAt: st.StartedAt,
		UpdatedAt: time.Now().UTC(), PRDFile: s.P.PRD, PRDPath: s.PRDPath, Iterations: map[string]int{}, StopReason: stop}
	if ps.StopReason == "" {
		ps.StopReason = st.StopReason
	}
	all := true
	for i := range s.P.Stages {
		stg := &s.P.Stages[i]
		ss := StageState{Name: stg.Name, Title: stg.DisplayTitle(), Status: engine.ItemPending, MaxIterations: stg.MaxIterations, Exit: stg.Exit.Describe()}
		if is := st.Items[stg.Name]; is != nil {
			ss.Status, ss.Iterations, ss.Commit, ss.LastResult = is.Status, is.Runs, is.Commit, is.LastResult
		}
		if stg.Name == starting {
			ss.Status = engine.ItemRunning
			if count {
				ss.Iterations++
			}
		}
		if stg.Name == passed {
			ss.Status = engine.ItemPassed
		}
		if ss.Iterations > 0 {
			ps.Iterations[stg.Name] = ss.Iterations
		}
		if ss.Status != engine.ItemPassed {
			if all {
				ps.Stage = stg.Name
			}
			all = false
		}
		ps.Stages = append(ps.Stages, ss)
	}
	ps.Complete = all
	if all && ps.StopReason == "" {
		ps.StopReason = fmt.Sprintf("all %s passed", engine.Plural(len(s.P.Stages), "stage"))
	}
	_ = store.WriteJSON(s.StatePath, ps)
	if s.ToolStatePath != "" {
		_ = os.MkdirAll(filepath.Dir(s.ToolStatePath), 0o755)
		_ = store.WriteJSON(s.ToolStatePath, ps)
	}
}
