// Package mcp is ralph's MCP server: an agent in one session starts,
// watches and steers a Ralph loop through tools (run, status, create-prd
// or create_prd, validate_prd, stop, approve, guide, the task tools, tail)
// and resources (the
// progress log, the state, the transcripts). Every tool but run runs the
// command line's own command in process, handed in as Options.Invoke (the
// command line imports this package, not the other way round), so its
// results, messages and exit codes are the CLI's; run starts ralph itself
// in the background.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Options are what the server takes from the command line.
type Options struct {
	// Dir is the server's folder: the repository of every tool call that
	// names none, and of the resources.
	Dir     string
	Version string
	// Invoke runs `ralph ARGS` in process in repo with its output
	// captured: the standard output, or a *ToolError with the command's
	// message and exit code.
	Invoke func(ctx context.Context, repo string, args ...string) (stdout string, err error)
	// ExitCode is ralph's exit code for an error.
	ExitCode func(error) int
	// Stop asks the run of p to stop after its current iteration; by says
	// who asked.
	Stop func(p engine.Paths, by string) error
	// Repos, when set, are the only repositories the tools act on (over
	// HTTP: Dir and the ones the person allowed); a repo argument or a
	// file argument outside them is refused. Nil: any (stdio, where the
	// client is the person's own agent).
	Repos []string
}

// ServeStdio serves srv on standard input and output until the client
// leaves or ctx ends.
func ServeStdio(ctx context.Context, srv *sdk.Server) error {
	err := srv.Run(ctx, &sdk.StdioTransport{})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// HTTPHandler serves srv over streamable HTTP.
func HTTPHandler(srv *sdk.Server) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
}

// server answers the tools and resources.
type server struct{ Options }

// NewServer is the MCP server over the repository at o.Dir (tools may
// name another).
func NewServer(o Options) *sdk.Server {
	r := &server{Options: o}
	s := sdk.NewServer(&sdk.Implementation{Name: "ralph", Version: o.Version}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "run", Description: "Start `ralph run` in the background in a repository on prd_path (or a task tree or a run folder) and return at once with its run id and metadata (all_passed, ready_to_merge, feature_branch, passed, total, status as it starts); with wait: true, return when the run ends, with the same metadata and its exit code. A second run where one is active is refused with who holds it."}, r.run)
	sdk.AddTool(s, &sdk.Tool{Name: "status", Description: "The run of a repository (of prd_path when given): all_passed, ready_to_merge, feature_branch, passed, total, each item's state (\"waiting for an answer\" while an agent's question waits for a person), the questions and their answers, the iteration, whether it is active, the stop reason."}, r.status)
	createPRD := "Write a PRD template: project, feature, prd_path (default prd.json), with the quality checks found in the repository (as ralph init finds them)."
	sdk.AddTool(s, &sdk.Tool{Name: "create-prd", Description: createPRD}, r.createPRD)
	sdk.AddTool(s, &sdk.Tool{Name: "create_prd", Description: createPRD + " (Another name for create-prd.)"}, r.createPRD)
	sdk.AddTool(s, &sdk.Tool{Name: "validate_prd", Description: "Validate a prd.json: every problem with its place, and no quality gate as run would refuse it, as `ralph prd validate`."}, r.validatePRD)
	sdk.AddTool(s, &sdk.Tool{Name: "stop", Description: "Ask the active run to stop after its current iteration."}, r.stop)
	sdk.AddTool(s, &sdk.Tool{Name: "approve", Description: "Approve the plan an item waits with (--plan-approval)."}, r.approve)
	sdk.AddTool(s, &sdk.Tool{Name: "guide", Description: "Give the next iterations of the run a person's guidance (`ralph guide`): it is added to their prompts under \"Guidance from a person\" until an iteration acknowledges it or it lapses; item aims it at one item. Refused when called from inside an iteration."}, r.guide)
	sdk.AddTool(s, &sdk.Tool{Name: "task_add", Description: "Add a task to the task tree (tasks.jsonl), optionally under a parent id."}, r.taskAdd)
	sdk.AddTool(s, &sdk.Tool{Name: "task_next", Description: "The next ready task of the task tree."}, r.taskNext)
	sdk.AddTool(s, &sdk.Tool{Name: "task_complete", Description: "Mark a task complete (inside a run: the agent's claim, verified by the gates)."}, r.taskComplete)
	sdk.AddTool(s, &sdk.Tool{Name: "task_list", Description: "The tasks of the task tree, optionally with one status."}, r.taskList)
	sdk.AddTool(s, &sdk.Tool{Name: "tail", Description: "The last N events of the run (default 20)."}, r.tail)
	s.AddReceivingMiddleware(hideAliasesFrom("codex", "create-prd"))
	s.AddResource(&sdk.Resource{URI: "ralph://progress", Name: "progress", Description: "The run's progress log (.ralph/progress.md)", MIMEType: "text/markdown"}, r.readFile(func(p engine.Paths) string { return p.Progress }))
	s.AddResource(&sdk.Resource{URI: "ralph://state", Name: "state", Description: "The run's state (.ralph/state.json, as ralph status --json has it)", MIMEType: "application/json"}, r.readState)
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "ralph://transcript/{iteration}", Name: "transcript", Description: "An iteration's transcript", MIMEType: "text/plain"}, r.readTranscript)
	return s
}

// hideAliasesFrom leaves the named tools out of the tool list a client
// whose name begins with client is given. Codex turns a tool name's "-"
// into "_", so create-prd would collide with create_prd and Codex would
// offer the model a hashed name instead; it gets create_prd alone (a call
// of either name still works).
func hideAliasesFrom(client string, hidden ...string) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*sdk.ListToolsResult)
			if err != nil || !ok {
				return res, err
			}
			ss, ok := req.GetSession().(*sdk.ServerSession)
			if !ok || ss.InitializeParams() == nil || ss.InitializeParams().ClientInfo == nil ||
				!strings.HasPrefix(ss.InitializeParams().ClientInfo.Name, client) {
				return res, err
			}
			list.Tools = slices.DeleteFunc(slices.Clone(list.Tools), func(t *sdk.Tool) bool { return slices.Contains(hidden, t.Name) })
			return list, nil
		}
	}
}

// repo resolves a tool's repository argument (default the server's
// folder) and checks it is a directory.
func (r *server) repo(arg string) (string, error) {
	dir := arg
	if dir == "" {
		dir = r.Dir
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(r.Dir, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", usage.Errorf("repo %q: not a folder", arg)
	}
	if r.Repos != nil {
		real := resolved(dir)
		if !slices.ContainsFunc(r.Repos, func(allowed string) bool { return resolved(allowed) == real }) {
			return "", usage.Errorf("repo %q: this server serves %s only (ralph mcp --allow-repo adds others)", arg, strings.Join(r.Repos, ", "))
		}
	}
	return dir, nil
}

// resolved is dir absolute with its links followed: the same folder by
// any name compares equal.
func resolved(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Clean(dir)
}

// file is a tool's path argument (def when empty) in repo; a path that
// leaves repo is refused (a tool writes and reads the repository's files,
// never others the client names).
func (r *server) file(repo, p, def string) (string, error) {
	path := inRepo(repo, p, def)
	dir := filepath.Dir(path)
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); err == nil || dir == filepath.Dir(dir) {
			break
		}
	}
	rel, err := filepath.Rel(resolved(repo), filepath.Join(resolved(dir), strings.TrimPrefix(path, dir)))
	if err != nil || !filepath.IsLocal(rel) {
		return "", usage.Errorf("%q is outside the repository %s", p, repo)
	}
	return path, nil
}

// ToolError is a command's failure as a tool error: the CLI's message and
// exit code.
type ToolError struct {
	Code int
	Msg  string
}

func (e *ToolError) Error() string { return fmt.Sprintf("%s (exit code %d)", e.Msg, e.Code) }

// fail is err as a tool error with ralph's exit code for it.
func (r *server) fail(err error) error {
	return &ToolError{Code: r.ExitCode(err), Msg: err.Error()}
}

// --- tools

// runInput are the run tool's arguments.
type runInput struct {
	Repo          string `json:"repo,omitempty" jsonschema:"the repository (default the server's folder)"`
	PRDPath       string `json:"prd_path,omitempty" jsonschema:"the PRD file (default prd.json)"`
	PRD           string `json:"prd,omitempty" jsonschema:"another name for prd_path"`
	Wait          bool   `json:"wait,omitempty" jsonschema:"return when the run ends, with its result (all_passed, ready_to_merge, feature_branch, passed, total)"`
	Tasks         string `json:"tasks,omitempty" jsonschema:"a task tree (tasks.jsonl) instead of a PRD"`
	RunDir        string `json:"run_dir,omitempty" jsonschema:"a run folder (ralph/runs/<id>) instead of a PRD"`
	Agent         string `json:"agent,omitempty" jsonschema:"the agent: claude, codex, opencode, gemini, native, cmd, scripted (default the config's)"`
	AgentCmd      string `json:"agent_cmd,omitempty" jsonschema:"for agent cmd: the program and its arguments"`
	Model         string `json:"model,omitempty"`
	MaxIterations int    `json:"max_iterations,omitempty"`
	NoGates       bool   `json:"no_gates,omitempty" jsonschema:"run without quality gates (items pass on the agent's word)"`
}

// runOutput is what run returns; with wait, also the run's result by
// codetether's names.
type runOutput struct {
	RunID         string `json:"run_id"`
	PID           int    `json:"pid"`
	Log           string `json:"log" jsonschema:"where the run's output goes"`
	Done          bool   `json:"done" jsonschema:"the run has ended (wait)"`
	ExitCode      *int   `json:"exit_code,omitempty" jsonschema:"ralph's exit code (wait): 0 complete, 3 a limit reached, 4 blocked"`
	AllPassed     *bool  `json:"all_passed,omitempty"`
	ReadyToMerge  *bool  `json:"ready_to_merge,omitempty"`
	FeatureBranch string `json:"feature_branch,omitempty"`
	Passed        *int   `json:"passed,omitempty"`
	Marked        *int   `json:"marked,omitempty" jsonschema:"items marked done by hand that nothing of ralph's verifies: never counted as passed"`
	Total         *int   `json:"total,omitempty"`
	Status        string `json:"status,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
}

func (r *server) run(ctx context.Context, _ *sdk.CallToolRequest, in runInput) (*sdk.CallToolResult, runOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, runOutput{}, err
	}
	if in.PRDPath != "" {
		in.PRD = in.PRDPath
	}
	for _, f := range []string{in.PRD, in.Tasks, in.RunDir} {
		if f != "" {
			if _, err := r.file(repo, f, ""); err != nil {
				return nil, runOutput{}, err
			}
		}
	}
	p := engine.PathsFor(repo)
	if active, holder := engine.ActiveRun(p); active {
		return nil, runOutput{}, r.fail(usage.Errorf("a run is already active in %s (%v): `ralph stop` it, or wait", repo, holder))
	}
	args := []string{"run", "--plain"}
	for _, a := range []struct{ flag, v string }{{"--prd", in.PRD}, {"--tasks", in.Tasks}, {"--agent", in.Agent}, {"--agent-cmd", in.AgentCmd}, {"--model", in.Model}} {
		if a.v != "" {
			args = append(args, a.flag, a.v)
		}
	}
	if in.MaxIterations > 0 {
		args = append(args, "--max-iterations", strconv.Itoa(in.MaxIterations))
	}
	if in.NoGates {
		args = append(args, "--no-gates")
	}
	if in.RunDir != "" {
		args = append(args, in.RunDir)
	}
	self, err := Executable()
	if err != nil {
		return nil, runOutput{}, err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, runOutput{}, err
	}
	logPath := filepath.Join(p.Dir, "mcp-run.log")
	logf, err := store.OpenOwn(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, runOutput{}, err
	}
	before := lastRunID(p)
	// Its own session: the run outlives this request and the server.
	c := exec.Command(self, args...)
	c.Dir, c.Stdout, c.Stderr = repo, logf, logf
	c.Env = append(os.Environ(), "RALPH_MCP_CHILD=1")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		logf.Close()
		return nil, runOutput{}, err
	}
	logf.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	deadline := time.After(30 * time.Second)
	// The run's metadata by codetether's names, at its start and (wait)
	// at its end.
	started := func(id string, exit error, ended bool) (*sdk.CallToolResult, runOutput, error) {
		out := runOutput{RunID: id, PID: c.Process.Pid, Log: logPath}
		if in.Wait && !ended {
			select {
			case exit = <-exited:
				ended = true
			case <-ctx.Done():
				return nil, runOutput{}, ctx.Err()
			}
		}
		_, st, err := r.status(ctx, nil, statusInput{Repo: in.Repo})
		if err != nil {
			return nil, runOutput{}, err
		}
		out.AllPassed, out.ReadyToMerge, out.FeatureBranch = &st.AllPassed, &st.ReadyToMerge, st.FeatureBranch
		out.Passed, out.Marked, out.Total, out.Status, out.StopReason = &st.Passed, &st.Marked, &st.Total, st.Status, st.StopReason
		if in.Wait || ended {
			code := 0
			var ee *exec.ExitError
			if errors.As(exit, &ee) {
				code = ee.ExitCode()
			}
			out.Done, out.ExitCode = true, &code
		}
		return nil, out, nil
	}
	for {
		if id := lastRunID(p); id != "" && id != before {
			return started(id, nil, false)
		}
		select {
		case err := <-exited:
			if id := lastRunID(p); id != "" && id != before {
				return started(id, err, true)
			}
			b, _ := os.ReadFile(logPath)
			code := r.ExitCode(err)
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			return nil, runOutput{}, &ToolError{Code: code, Msg: strings.TrimSpace(tailLines(string(b), 20))}
		case <-deadline:
			return nil, runOutput{}, fmt.Errorf("the run did not start within 30 s (pid %d; its output is in %s)", c.Process.Pid, logPath)
		case <-ctx.Done():
			return nil, runOutput{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Executable is the ralph binary this process runs as: the command it was
// started by when that resolves (a test's ralph is a link to the test
// binary), else the executable.
func Executable() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
	}
	return os.Executable()
}

// lastRunID is the run id of the newest run_started event ("" for none).
func lastRunID(p engine.Paths) string {
	id := ""
	_ = store.ReadJSONL(p.Events, func(_ int, b []byte) error {
		var ev engine.Event
		if json.Unmarshal(b, &ev) == nil && (ev.Type == "run_started" || ev.Type == "run_resumed") {
			id = ev.RunID
		}
		return nil
	})
	return id
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// repoInput is a tool argument naming only the repository.
type repoInput struct {
	Repo string `json:"repo,omitempty" jsonschema:"the repository (default the server's folder)"`
}

// StatusItem is one item of the status.
type StatusItem struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
	// Attempts are the attempts used (engine.ItemState.AttemptsUsed: a
	// story that passed on its first try used 1) of MaxAttempts.
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	Commit      string `json:"commit,omitempty"`
}

// statusOutput is the status metadata.
type statusOutput struct {
	RunID         string       `json:"run_id"`
	AllPassed     bool         `json:"all_passed" jsonschema:"every item passed (false while any is only marked done by hand)"`
	ReadyToMerge  bool         `json:"ready_to_merge" jsonschema:"every item passed and the run ended complete"`
	FeatureBranch string       `json:"feature_branch"`
	Passed        int          `json:"passed"`
	Marked        int          `json:"marked" jsonschema:"items marked done by hand (passes: true, a ticked box, an archived task) with no commit of ralph's that records them: not verified, never counted as passed"`
	Total         int          `json:"total"`
	Blocked       int          `json:"blocked"`
	Status        string       `json:"status"`
	Active        bool         `json:"active"`
	Iteration     int          `json:"iteration"`
	MaxIterations int          `json:"max_iterations"`
	StopReason    string       `json:"stop_reason,omitempty"`
	Next          string       `json:"next,omitempty" jsonschema:"what a person does next about a stopped run (the command)"`
	Items         []StatusItem `json:"items"`
	// Questions are the agents' questions to a person (ralph ask): an
	// item with one that waits is "waiting for an answer".
	Questions []engine.QuestionView `json:"questions" jsonschema:"the agents' questions to a person (ralph ask) and the answers; ralph answer ID TEXT answers one"`
}

// statusInput are status's arguments.
type statusInput struct {
	Repo    string `json:"repo,omitempty" jsonschema:"the repository (default the server's folder)"`
	PRDPath string `json:"prd_path,omitempty" jsonschema:"the PRD whose run to show (an error when the last run was of another source)"`
}

func (r *server) status(ctx context.Context, _ *sdk.CallToolRequest, in statusInput) (*sdk.CallToolResult, statusOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, statusOutput{}, err
	}
	args := []string{"status", "--json"}
	prdPath := ""
	if in.PRDPath != "" {
		path, err := r.file(repo, in.PRDPath, "")
		if err != nil {
			return nil, statusOutput{}, err
		}
		args = append(args, "--prd", path)
		prdPath = path
	}
	if res, ok, err := notStarted(repo, prdPath); ok || err != nil {
		return nil, res, err
	}
	out, err := r.Invoke(ctx, repo, args...)
	if err != nil {
		return nil, statusOutput{}, err
	}
	var doc struct {
		State     *engine.State         `json:"state"`
		Active    bool                  `json:"active"`
		Passed    int                   `json:"passed"`
		Marked    int                   `json:"marked"`
		Blocked   int                   `json:"blocked"`
		Total     int                   `json:"total"`
		Message   string                `json:"message"`
		Questions []engine.QuestionView `json:"questions"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, statusOutput{}, fmt.Errorf("reading ralph status --json: %v", err)
	}
	if doc.State == nil {
		// No run yet: status --json says so in its message.
		return nil, statusOutput{}, &ToolError{Code: 2, Msg: doc.Message}
	}
	st := doc.State
	res := statusOutput{RunID: st.RunID, FeatureBranch: st.Branch, Passed: doc.Passed, Marked: doc.Marked, Total: doc.Total, Blocked: doc.Blocked,
		Status: st.Status, Active: doc.Active, Iteration: st.Iteration, MaxIterations: st.MaxIterations, StopReason: st.StopReason}
	if !doc.Active {
		res.Next = st.NextStep()
	}
	res.AllPassed = doc.Total > 0 && doc.Passed == doc.Total
	res.ReadyToMerge = res.AllPassed && st.Status == engine.StatusComplete && !doc.Active
	asked := map[string]bool{}
	res.Questions = doc.Questions
	if res.Questions == nil {
		res.Questions = []engine.QuestionView{}
	}
	for _, q := range res.Questions {
		if q.Waiting {
			asked[q.Item] = true
		}
	}
	for _, id := range st.Order {
		is := st.Items[id]
		status := is.Status
		if asked[id] && status == engine.ItemPending {
			status = "waiting for an answer"
		}
		res.Items = append(res.Items, StatusItem{ID: id, Title: is.Title, Status: status, Attempts: is.AttemptsUsed(), MaxAttempts: st.MaxAttempts, Commit: is.Commit})
	}
	return nil, res, nil
}

// notStarted is the status of a PRD no run has started on yet (ok): the
// one named, or the repository's prd.json when there is no run at all. Its
// totals come from the file; a story the file marks passed is no pass
// until a run judged it, so passed is 0 and such an item says so.
func notStarted(repo, prdPath string) (statusOutput, bool, error) {
	p := engine.PathsFor(repo)
	st, _, err := engine.LoadOrRebuildState(p)
	if err != nil {
		return statusOutput{}, false, err
	}
	if prdPath == "" {
		if st != nil {
			return statusOutput{}, false, nil
		}
		prdPath = filepath.Join(repo, "prd.json")
		if _, err := os.Stat(prdPath); err != nil {
			return statusOutput{}, false, nil // no run, no PRD: the CLI's words
		}
	} else if st != nil && sameFile(st.SourcePath, prdPath) {
		return statusOutput{}, false, nil
	}
	doc, err := prd.Load(prdPath)
	if err != nil {
		return statusOutput{}, true, usage.Errorf("%v", err)
	}
	rel, _ := filepath.Rel(repo, prdPath)
	res := statusOutput{FeatureBranch: doc.BranchName, Total: len(doc.Stories), Status: "not_started", Items: []StatusItem{},
		Next: "ralph run --prd " + rel}
	for _, s := range doc.Stories {
		status := engine.ItemPending
		if s.Passes {
			// (a run judges the mark by ralph's commits; until then it
			// is not verified)
			status = engine.ItemMarked
			res.Marked++
		}
		res.Items = append(res.Items, StatusItem{ID: s.ID, Title: s.Title, Status: status})
	}
	return res, true, nil
}

// sameFile reports whether a and b name the same file (links resolved).
func sameFile(a, b string) bool {
	return a == b || resolved(a) == resolved(b)
}

// createPRDInput are create_prd's arguments.
type createPRDInput struct {
	Repo    string `json:"repo,omitempty"`
	Project string `json:"project" jsonschema:"the project's name"`
	Feature string `json:"feature" jsonschema:"the feature's name (the branch is named after it)"`
	PRDPath string `json:"prd_path,omitempty" jsonschema:"where to write it (default prd.json)"`
	Path    string `json:"path,omitempty" jsonschema:"another name for prd_path"`
	Force   bool   `json:"force,omitempty" jsonschema:"overwrite an existing file"`
}

// textOutput is a command's own words.
type textOutput struct {
	Text string `json:"text"`
}

func (r *server) createPRD(ctx context.Context, _ *sdk.CallToolRequest, in createPRDInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	if in.PRDPath != "" {
		in.Path = in.PRDPath
	}
	out, err := r.file(repo, in.Path, "prd.json")
	if err != nil {
		return nil, textOutput{}, err
	}
	args := []string{"prd", "new", "--project", in.Project, "--feature", in.Feature, "-o", out}
	if in.Force {
		args = append(args, "--force")
	}
	return r.text(ctx, repo, args...)
}

// text runs a command and returns its output as the tool's text.
func (r *server) text(ctx context.Context, repo string, args ...string) (*sdk.CallToolResult, textOutput, error) {
	out, err := r.Invoke(ctx, repo, args...)
	if err != nil {
		return nil, textOutput{}, err
	}
	if strings.TrimSpace(out) == "" {
		out = "ok: ralph " + strings.Join(args, " ")
	}
	return nil, textOutput{Text: strings.TrimSpace(out)}, nil
}

// validateInput are validate_prd's arguments.
type validateInput struct {
	Repo    string `json:"repo,omitempty"`
	Path    string `json:"path,omitempty" jsonschema:"the file (default prd.json)"`
	NoGates bool   `json:"no_gates,omitempty" jsonschema:"accept a PRD without quality gates (as run with no_gates would run it)"`
}

func (r *server) validatePRD(ctx context.Context, _ *sdk.CallToolRequest, in validateInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	path, err := r.file(repo, in.Path, "prd.json")
	if err != nil {
		return nil, textOutput{}, err
	}
	args := []string{"prd", "validate", path}
	if in.NoGates {
		args = append(args, "--no-gates")
	}
	return r.text(ctx, repo, args...)
}

func (r *server) stop(ctx context.Context, _ *sdk.CallToolRequest, in repoInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	p := engine.PathsFor(repo)
	active, holder := engine.ActiveRun(p)
	if !active {
		return nil, textOutput{}, r.fail(usage.Errorf("no run is active in %s; nothing to stop", repo))
	}
	if err := r.Stop(p, "the MCP stop tool"); err != nil {
		return nil, textOutput{}, err
	}
	return nil, textOutput{Text: fmt.Sprintf("asked the run (%v) to stop after its current iteration", holder)}, nil
}

// idInput names an item or a task.
type idInput struct {
	Repo string `json:"repo,omitempty"`
	ID   string `json:"id" jsonschema:"the item's or task's id"`
}

func (r *server) approve(ctx context.Context, _ *sdk.CallToolRequest, in idInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	return r.text(ctx, repo, "approve", in.ID)
}

// guideInput are guide's arguments.
type guideInput struct {
	Repo string `json:"repo,omitempty"`
	Text string `json:"text" jsonschema:"the guidance, as a person would say it to the agent"`
	Item string `json:"item,omitempty" jsonschema:"the item it is for (default every item)"`
}

func (r *server) guide(ctx context.Context, _ *sdk.CallToolRequest, in guideInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	args := []string{"guide", "--by", "the MCP guide tool", in.Text}
	if in.Item != "" {
		args = append(args, "--item", in.Item)
	}
	return r.text(ctx, repo, args...)
}

// taskAddInput are task_add's arguments.
type taskAddInput struct {
	Repo   string `json:"repo,omitempty"`
	Title  string `json:"title"`
	Parent string `json:"parent,omitempty" jsonschema:"the parent task's id (a subtask)"`
	File   string `json:"file,omitempty" jsonschema:"the task tree (default tasks.jsonl)"`
}

func (r *server) taskAdd(ctx context.Context, _ *sdk.CallToolRequest, in taskAddInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	file, err := r.fileArg(repo, in.File)
	if err != nil {
		return nil, textOutput{}, err
	}
	args := append([]string{"task", "add"}, file...)
	if in.Parent != "" {
		args = append(args, in.Parent)
	}
	return r.text(ctx, repo, append(args, in.Title)...)
}

// fileArg is --file with the task tree's path in the repository.
func (r *server) fileArg(repo, f string) ([]string, error) {
	if f == "" {
		return nil, nil
	}
	path, err := r.file(repo, f, "")
	if err != nil {
		return nil, err
	}
	return []string{"--file", path}, nil
}

// inRepo is a tool's path argument (def when empty) in the repository:
// the commands run in process, where "." is the server's folder.
func inRepo(repo, p, def string) string {
	if p == "" {
		p = def
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(repo, p)
}

// taskFileInput names the task tree.
type taskFileInput struct {
	Repo   string `json:"repo,omitempty"`
	File   string `json:"file,omitempty" jsonschema:"the task tree (default tasks.jsonl)"`
	Status string `json:"status,omitempty" jsonschema:"task_list: only tasks with this status"`
}

func (r *server) taskNext(ctx context.Context, _ *sdk.CallToolRequest, in taskFileInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	file, err := r.fileArg(repo, in.File)
	if err != nil {
		return nil, textOutput{}, err
	}
	return r.text(ctx, repo, append([]string{"task", "next", "--json"}, file...)...)
}

// taskIDInput names a task.
type taskIDInput struct {
	Repo string `json:"repo,omitempty"`
	ID   string `json:"id"`
	File string `json:"file,omitempty" jsonschema:"the task tree (default tasks.jsonl)"`
}

func (r *server) taskComplete(ctx context.Context, _ *sdk.CallToolRequest, in taskIDInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	file, err := r.fileArg(repo, in.File)
	if err != nil {
		return nil, textOutput{}, err
	}
	return r.text(ctx, repo, append(append([]string{"task", "complete"}, file...), in.ID)...)
}

func (r *server) taskList(ctx context.Context, _ *sdk.CallToolRequest, in taskFileInput) (*sdk.CallToolResult, textOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, textOutput{}, err
	}
	file, err := r.fileArg(repo, in.File)
	if err != nil {
		return nil, textOutput{}, err
	}
	args := append([]string{"task", "list", "--json"}, file...)
	if in.Status != "" {
		args = append(args, "--status", in.Status)
	}
	return r.text(ctx, repo, args...)
}

// tailInput are tail's arguments.
type tailInput struct {
	Repo string `json:"repo,omitempty"`
	N    int    `json:"n,omitempty" jsonschema:"how many events (default 20, at most 500)"`
}

// tailOutput is the last events.
type tailOutput struct {
	Events []engine.Event `json:"events"`
}

func (r *server) tail(ctx context.Context, _ *sdk.CallToolRequest, in tailInput) (*sdk.CallToolResult, tailOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, tailOutput{}, err
	}
	n := in.N
	if n <= 0 {
		n = 20
	}
	if n > 500 {
		return nil, tailOutput{}, r.fail(usage.Errorf("n must be at most 500"))
	}
	var evs []engine.Event
	err = store.ReadJSONL(engine.PathsFor(repo).Events, func(_ int, b []byte) error {
		var ev engine.Event
		if json.Unmarshal(b, &ev) == nil {
			evs = append(evs, ev)
			if len(evs) > n {
				evs = evs[1:]
			}
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, tailOutput{}, err
	}
	return nil, tailOutput{Events: evs}, nil
}

// --- resources

func (r *server) readFile(path func(engine.Paths) string) sdk.ResourceHandler {
	return func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		b, err := os.ReadFile(path(engine.PathsFor(r.Dir)))
		if err != nil {
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: string(b)}}}, nil
	}
}

func (r *server) readState(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	out, err := r.Invoke(ctx, r.Dir, "status", "--json")
	if err != nil {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: out}}}, nil
}

func (r *server) readTranscript(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(req.Params.URI, "ralph://transcript/"))
	if err != nil {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	byIter, _, _ := engine.TranscriptFiles(engine.PathsFor(r.Dir))
	path, ok := byIter[n]
	if !ok {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: string(b)}}}, nil
}
