package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// MCPOptions are `ralph mcp`'s settings.
type MCPOptions struct {
	IO   *Factory
	HTTP string
}

// NewCmdMCP builds `ralph mcp`.
func NewCmdMCP(f *Factory, runF func(*MCPOptions) error) *cobra.Command {
	opts := &MCPOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve ralph's tools to an agent over MCP (stdio, or streamable HTTP with --http)",
		Long: `Run ralph as an MCP server, so that an agent in one session can start, watch
and steer a Ralph loop. Tools: run (starts ` + "`ralph run`" + ` in the background in a
repository and returns its run id), status (all_passed, ready_to_merge,
feature_branch, passed, total, each item, the iteration, the stop reason),
create_prd, validate_prd, stop, approve, task_add, task_next, task_complete,
task_list, tail (the last events). Resources: ralph://progress,
ralph://state and ralph://transcript/{iteration} of the repository the
server runs in. Every tool runs the same command code as the CLI: its
errors are tool errors with the CLI's message and exit code.

Install it in an agent's MCP configuration with ` + "`ralph mcp install`" + `.`,
		Example: `  ralph mcp                       # stdio, for an agent's MCP client
  ralph mcp --http 127.0.0.1:7331  # streamable HTTP at http://127.0.0.1:7331/mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runMCP(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.HTTP, "http", "", "serve streamable HTTP on `ADDR` (path /mcp) instead of stdio")
	cmd.AddCommand(NewCmdMCPInstall(f, nil))
	return cmd
}

func runMCP(ctx context.Context, o *MCPOptions) error {
	wd, err := o.IO.Getwd()
	if err != nil {
		return err
	}
	srv := NewMCPServer(o.IO, wd)
	if o.HTTP == "" {
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", o.HTTP)
	if err != nil {
		return usage.Errorf("--http %s: %v", o.HTTP, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	fmt.Fprintf(o.IO.IO.ErrOut, "ralph: MCP over streamable HTTP at http://%s/mcp\n", ln.Addr())
	return serveHTTP(ctx, ln, mux)
}

// ralphMCP is the server's state: the folder it runs in (the default
// repository of every tool) and how to start ralph.
type ralphMCP struct {
	f   *Factory
	dir string
}

// NewMCPServer is the MCP server over the repository at dir (tools may
// name another).
func NewMCPServer(f *Factory, dir string) *mcp.Server {
	r := &ralphMCP{f: f, dir: dir}
	s := mcp.NewServer(&mcp.Implementation{Name: "ralph", Version: versionString()}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "run", Description: "Start `ralph run` in the background in a repository (a PRD, a task tree or a run folder) and return its run id at once; a second run where one is active is refused with who holds it."}, r.run)
	mcp.AddTool(s, &mcp.Tool{Name: "status", Description: "The run of a repository: all_passed, ready_to_merge, feature_branch, passed, total, each item's state, the iteration, whether it is active, the stop reason."}, r.status)
	mcp.AddTool(s, &mcp.Tool{Name: "create_prd", Description: "Write a PRD template (seed 002's create-prd): project, feature, path (default prd.json)."}, r.createPRD)
	mcp.AddTool(s, &mcp.Tool{Name: "validate_prd", Description: "Validate a prd.json: every problem with its place, as `ralph prd validate`."}, r.validatePRD)
	mcp.AddTool(s, &mcp.Tool{Name: "stop", Description: "Ask the active run to stop after its current iteration."}, r.stop)
	mcp.AddTool(s, &mcp.Tool{Name: "approve", Description: "Approve the plan an item waits with (--plan-approval)."}, r.approve)
	mcp.AddTool(s, &mcp.Tool{Name: "task_add", Description: "Add a task to the task tree (tasks.jsonl), optionally under a parent id."}, r.taskAdd)
	mcp.AddTool(s, &mcp.Tool{Name: "task_next", Description: "The next ready task of the task tree."}, r.taskNext)
	mcp.AddTool(s, &mcp.Tool{Name: "task_complete", Description: "Mark a task complete (inside a run: the agent's claim, verified by the gates)."}, r.taskComplete)
	mcp.AddTool(s, &mcp.Tool{Name: "task_list", Description: "The tasks of the task tree, optionally with one status."}, r.taskList)
	mcp.AddTool(s, &mcp.Tool{Name: "tail", Description: "The last N events of the run (default 20)."}, r.tail)
	s.AddResource(&mcp.Resource{URI: "ralph://progress", Name: "progress", Description: "The run's progress log (.ralph/progress.md)", MIMEType: "text/markdown"}, r.readFile(func(p engine.Paths) string { return p.Progress }))
	s.AddResource(&mcp.Resource{URI: "ralph://state", Name: "state", Description: "The run's state (.ralph/state.json, as ralph status --json has it)", MIMEType: "application/json"}, r.readState)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "ralph://transcript/{iteration}", Name: "transcript", Description: "An iteration's transcript", MIMEType: "text/plain"}, r.readTranscript)
	return s
}

// repo resolves a tool's repository argument (default the server's
// folder) and checks it is a directory.
func (r *ralphMCP) repo(arg string) (string, error) {
	dir := arg
	if dir == "" {
		dir = r.dir
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(r.dir, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", usage.Errorf("repo %q: not a folder", arg)
	}
	return dir, nil
}

// invoke runs a ralph command in-process, in repo, with captured output:
// the same code, messages and exit codes as the CLI.
func (r *ralphMCP) invoke(ctx context.Context, repo string, args ...string) (stdout string, err error) {
	streams, _, out, errb := iostreams.Test()
	f := &Factory{IO: streams, Getwd: func() (string, error) { return repo, nil }, Runner: r.f.Runner}
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	_, cerr := cmd.ExecuteContextC(ctx)
	if code := ExitCode(cerr); code != ExitOK {
		msg := strings.TrimSpace(errb.String())
		var se *statusError
		if cerr != nil && !errors.As(cerr, &se) {
			msg = strings.TrimSpace(strings.TrimSpace(msg) + "\n" + cerr.Error())
		}
		return out.String(), &toolError{code: code, msg: msg}
	}
	return out.String(), nil
}

// toolError is a command's failure as a tool error: the CLI's message and
// exit code.
type toolError struct {
	code int
	msg  string
}

func (e *toolError) Error() string { return fmt.Sprintf("%s (exit code %d)", e.msg, e.code) }

// --- tools

// RunInput are the run tool's arguments.
type RunInput struct {
	Repo          string `json:"repo,omitempty" jsonschema:"the repository (default the server's folder)"`
	PRD           string `json:"prd,omitempty" jsonschema:"the PRD file (default prd.json)"`
	Tasks         string `json:"tasks,omitempty" jsonschema:"a task tree (tasks.jsonl) instead of a PRD"`
	RunDir        string `json:"run_dir,omitempty" jsonschema:"a run folder (ralph/runs/<id>) instead of a PRD"`
	Agent         string `json:"agent,omitempty" jsonschema:"the agent: claude, codex, opencode, gemini, native, cmd, scripted (default the config's)"`
	AgentCmd      string `json:"agent_cmd,omitempty" jsonschema:"for agent cmd: the program and its arguments"`
	Model         string `json:"model,omitempty"`
	MaxIterations int    `json:"max_iterations,omitempty"`
	NoGates       bool   `json:"no_gates,omitempty" jsonschema:"run without quality gates (items pass on the agent's word)"`
}

// RunOutput is what run returns.
type RunOutput struct {
	RunID string `json:"run_id"`
	PID   int    `json:"pid"`
	Log   string `json:"log" jsonschema:"where the run's output goes"`
}

func (r *ralphMCP) run(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, RunOutput{}, err
	}
	p := engine.PathsFor(repo)
	if active, holder := engine.ActiveRun(p); active {
		return nil, RunOutput{}, &toolError{code: ExitUsage, msg: fmt.Sprintf("a run is already active in %s (%v): `ralph stop` it, or wait", repo, holder)}
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
	self, err := selfPath()
	if err != nil {
		return nil, RunOutput{}, err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, RunOutput{}, err
	}
	logPath := filepath.Join(p.Dir, "mcp-run.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, RunOutput{}, err
	}
	before := lastRunID(p)
	// Its own session: the run outlives this request and the server.
	c := exec.Command(self, args...)
	c.Dir, c.Stdout, c.Stderr = repo, logf, logf
	c.Env = append(os.Environ(), "RALPH_MCP_CHILD=1")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		logf.Close()
		return nil, RunOutput{}, err
	}
	logf.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		if id := lastRunID(p); id != "" && id != before {
			return nil, RunOutput{RunID: id, PID: c.Process.Pid, Log: logPath}, nil
		}
		select {
		case err := <-exited:
			if id := lastRunID(p); id != "" && id != before {
				return nil, RunOutput{RunID: id, PID: c.Process.Pid, Log: logPath}, nil
			}
			b, _ := os.ReadFile(logPath)
			code := ExitError
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			return nil, RunOutput{}, &toolError{code: code, msg: strings.TrimSpace(tailLines(string(b), 20))}
		case <-deadline:
			return nil, RunOutput{}, fmt.Errorf("the run did not start within 30 s (pid %d; its output is in %s)", c.Process.Pid, logPath)
		case <-ctx.Done():
			return nil, RunOutput{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// selfPath is the ralph binary this process runs as: the command it was
// started by when that resolves (a test's ralph is a link to the test
// binary), else the executable.
func selfPath() (string, error) {
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

// RepoInput is a tool argument naming only the repository.
type RepoInput struct {
	Repo string `json:"repo,omitempty" jsonschema:"the repository (default the server's folder)"`
}

// StatusItem is one item of the status.
type StatusItem struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Commit   string `json:"commit,omitempty"`
}

// StatusOutput is seed 002's status metadata.
type StatusOutput struct {
	RunID         string       `json:"run_id"`
	AllPassed     bool         `json:"all_passed"`
	ReadyToMerge  bool         `json:"ready_to_merge" jsonschema:"every item passed and the run ended complete"`
	FeatureBranch string       `json:"feature_branch"`
	Passed        int          `json:"passed"`
	Total         int          `json:"total"`
	Blocked       int          `json:"blocked"`
	Status        string       `json:"status"`
	Active        bool         `json:"active"`
	Iteration     int          `json:"iteration"`
	MaxIterations int          `json:"max_iterations"`
	StopReason    string       `json:"stop_reason,omitempty"`
	Items         []StatusItem `json:"items"`
}

func (r *ralphMCP) status(ctx context.Context, _ *mcp.CallToolRequest, in RepoInput) (*mcp.CallToolResult, StatusOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, StatusOutput{}, err
	}
	out, err := r.invoke(ctx, repo, "status", "--json")
	if err != nil {
		return nil, StatusOutput{}, err
	}
	var doc struct {
		State   *engine.State `json:"state"`
		Active  bool          `json:"active"`
		Passed  int           `json:"passed"`
		Blocked int           `json:"blocked"`
		Total   int           `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.State == nil {
		return nil, StatusOutput{}, fmt.Errorf("reading ralph status --json: %v", err)
	}
	st := doc.State
	res := StatusOutput{RunID: st.RunID, FeatureBranch: st.Branch, Passed: doc.Passed, Total: doc.Total, Blocked: doc.Blocked,
		Status: st.Status, Active: doc.Active, Iteration: st.Iteration, MaxIterations: st.MaxIterations, StopReason: st.StopReason}
	res.AllPassed = doc.Total > 0 && doc.Passed == doc.Total
	res.ReadyToMerge = res.AllPassed && st.Status == engine.StatusComplete && !doc.Active
	for _, id := range st.Order {
		is := st.Items[id]
		res.Items = append(res.Items, StatusItem{ID: id, Title: is.Title, Status: is.Status, Attempts: is.Attempts, Commit: is.Commit})
	}
	return nil, res, nil
}

// CreatePRDInput are create_prd's arguments.
type CreatePRDInput struct {
	Repo    string `json:"repo,omitempty"`
	Project string `json:"project" jsonschema:"the project's name"`
	Feature string `json:"feature" jsonschema:"the feature's name (the branch is named after it)"`
	Path    string `json:"path,omitempty" jsonschema:"where to write it (default prd.json)"`
	Force   bool   `json:"force,omitempty" jsonschema:"overwrite an existing file"`
}

// TextOutput is a command's own words.
type TextOutput struct {
	Text string `json:"text"`
}

func (r *ralphMCP) createPRD(ctx context.Context, _ *mcp.CallToolRequest, in CreatePRDInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	args := []string{"prd", "new", "--project", in.Project, "--feature", in.Feature, "-o", inRepo(repo, in.Path, "prd.json")}
	if in.Force {
		args = append(args, "--force")
	}
	return r.text(ctx, repo, args...)
}

// text runs a command and returns its output as the tool's text.
func (r *ralphMCP) text(ctx context.Context, repo string, args ...string) (*mcp.CallToolResult, TextOutput, error) {
	out, err := r.invoke(ctx, repo, args...)
	if err != nil {
		return nil, TextOutput{}, err
	}
	if strings.TrimSpace(out) == "" {
		out = "ok: ralph " + strings.Join(args, " ")
	}
	return nil, TextOutput{Text: strings.TrimSpace(out)}, nil
}

// PathInput names a file in the repository.
type PathInput struct {
	Repo string `json:"repo,omitempty"`
	Path string `json:"path,omitempty" jsonschema:"the file (default prd.json)"`
}

func (r *ralphMCP) validatePRD(ctx context.Context, _ *mcp.CallToolRequest, in PathInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	return r.text(ctx, repo, "prd", "validate", inRepo(repo, in.Path, "prd.json"))
}

func (r *ralphMCP) stop(ctx context.Context, _ *mcp.CallToolRequest, in RepoInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	p := engine.PathsFor(repo)
	active, holder := engine.ActiveRun(p)
	if !active {
		return nil, TextOutput{}, &toolError{code: ExitUsage, msg: "no run is active in " + repo + "; nothing to stop"}
	}
	if err := requestStop(p, "the MCP stop tool"); err != nil {
		return nil, TextOutput{}, err
	}
	return nil, TextOutput{Text: fmt.Sprintf("asked the run (%v) to stop after its current iteration", holder)}, nil
}

// IDInput names an item or a task.
type IDInput struct {
	Repo string `json:"repo,omitempty"`
	ID   string `json:"id" jsonschema:"the item's or task's id"`
}

func (r *ralphMCP) approve(ctx context.Context, _ *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	return r.text(ctx, repo, "approve", in.ID)
}

// TaskAddInput are task_add's arguments.
type TaskAddInput struct {
	Repo   string `json:"repo,omitempty"`
	Title  string `json:"title"`
	Parent string `json:"parent,omitempty" jsonschema:"the parent task's id (a subtask)"`
	File   string `json:"file,omitempty" jsonschema:"the task tree (default tasks.jsonl)"`
}

func (r *ralphMCP) taskAdd(ctx context.Context, _ *mcp.CallToolRequest, in TaskAddInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	args := append([]string{"task", "add"}, fileArg(repo, in.File)...)
	if in.Parent != "" {
		args = append(args, in.Parent)
	}
	return r.text(ctx, repo, append(args, in.Title)...)
}

// fileArg is --file with the task tree's path in the repository.
func fileArg(repo, f string) []string {
	if f == "" {
		return nil
	}
	return []string{"--file", inRepo(repo, f, "")}
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

// TaskFileInput names the task tree.
type TaskFileInput struct {
	Repo   string `json:"repo,omitempty"`
	File   string `json:"file,omitempty" jsonschema:"the task tree (default tasks.jsonl)"`
	Status string `json:"status,omitempty" jsonschema:"task_list: only tasks with this status"`
}

func (r *ralphMCP) taskNext(ctx context.Context, _ *mcp.CallToolRequest, in TaskFileInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	return r.text(ctx, repo, append([]string{"task", "next", "--json"}, fileArg(repo, in.File)...)...)
}

// TaskIDInput names a task.
type TaskIDInput struct {
	Repo string `json:"repo,omitempty"`
	ID   string `json:"id"`
	File string `json:"file,omitempty" jsonschema:"the task tree (default tasks.jsonl)"`
}

func (r *ralphMCP) taskComplete(ctx context.Context, _ *mcp.CallToolRequest, in TaskIDInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	return r.text(ctx, repo, append(append([]string{"task", "complete"}, fileArg(repo, in.File)...), in.ID)...)
}

func (r *ralphMCP) taskList(ctx context.Context, _ *mcp.CallToolRequest, in TaskFileInput) (*mcp.CallToolResult, TextOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TextOutput{}, err
	}
	args := append([]string{"task", "list", "--json"}, fileArg(repo, in.File)...)
	if in.Status != "" {
		args = append(args, "--status", in.Status)
	}
	return r.text(ctx, repo, args...)
}

// TailInput are tail's arguments.
type TailInput struct {
	Repo string `json:"repo,omitempty"`
	N    int    `json:"n,omitempty" jsonschema:"how many events (default 20, at most 500)"`
}

// TailOutput is the last events.
type TailOutput struct {
	Events []engine.Event `json:"events"`
}

func (r *ralphMCP) tail(ctx context.Context, _ *mcp.CallToolRequest, in TailInput) (*mcp.CallToolResult, TailOutput, error) {
	repo, err := r.repo(in.Repo)
	if err != nil {
		return nil, TailOutput{}, err
	}
	n := in.N
	if n <= 0 {
		n = 20
	}
	if n > 500 {
		return nil, TailOutput{}, &toolError{code: ExitUsage, msg: "n must be at most 500"}
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
		return nil, TailOutput{}, err
	}
	return nil, TailOutput{Events: evs}, nil
}

// --- resources

func (r *ralphMCP) readFile(path func(engine.Paths) string) mcp.ResourceHandler {
	return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		b, err := os.ReadFile(path(engine.PathsFor(r.dir)))
		if err != nil {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: string(b)}}}, nil
	}
}

func (r *ralphMCP) readState(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	out, err := r.invoke(ctx, r.dir, "status", "--json")
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: out}}}, nil
}

func (r *ralphMCP) readTranscript(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(req.Params.URI, "ralph://transcript/"))
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	byIter, _, _ := engine.TranscriptFiles(engine.PathsFor(r.dir))
	path, ok := byIter[n]
	if !ok {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: string(b)}}}, nil
}

// MCPInstallOptions are `ralph mcp install`'s settings.
type MCPInstallOptions struct {
	IO                              *Factory
	Claude, Codex, Gemini, Opencode bool
	Scope                           string
}

// NewCmdMCPInstall builds `ralph mcp install`.
func NewCmdMCPInstall(f *Factory, runF func(*MCPInstallOptions) error) *cobra.Command {
	opts := &MCPInstallOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "install [--claude] [--codex] [--gemini] [--opencode] [--scope project|user]",
		Short: "Add ralph's MCP server to an agent's MCP client configuration",
		Long: `Add ralph's MCP server (this binary's absolute path + " mcp", over stdio) to
the agents' configuration, keeping every other key and server:

  Claude Code  project: .mcp.json               user: ~/.claude.json        mcpServers.ralph
  Codex        user: ~/.codex/config.toml ($CODEX_HOME)                      [mcp_servers.ralph]
  Gemini CLI   project: .gemini/settings.json    user: ~/.gemini/settings.json  mcpServers.ralph
  opencode     project: opencode.json            user: ~/.config/opencode/opencode.json  mcp.ralph

Running it twice changes nothing. A configuration file that is not valid
JSON is an error naming file:line:col, and nothing is written.`,
		Example: `  ralph mcp install --claude
  ralph mcp install --codex --scope user
  ralph mcp install --gemini --opencode`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return mcpInstall(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.Claude, "claude", false, "Claude Code (the default when no agent is named)")
	fl.BoolVar(&opts.Codex, "codex", false, "Codex (user scope)")
	fl.BoolVar(&opts.Gemini, "gemini", false, "Gemini CLI")
	fl.BoolVar(&opts.Opencode, "opencode", false, "opencode")
	fl.StringVar(&opts.Scope, "scope", hook.ScopeProject, "`SCOPE`: project (this repository) or user (your home folder)")
	return cmd
}

func mcpInstall(ctx context.Context, o *MCPInstallOptions) error {
	f := o.IO
	var agents []string
	for _, a := range []struct {
		on   bool
		name string
	}{{o.Claude, hook.Claude}, {o.Codex, hook.Codex}, {o.Gemini, hook.Gemini}, {o.Opencode, hook.Opencode}} {
		if a.on {
			agents = append(agents, a.name)
		}
	}
	if len(agents) == 0 {
		agents = []string{hook.Claude}
	}
	root, home, err := configRoots(ctx, f, o.Scope)
	if err != nil {
		return err
	}
	exe, err := selfPath()
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	argv := []string{exe, "mcp"}
	wd, _ := f.Getwd()
	for _, a := range agents {
		path, err := hook.MCPConfigPath(a, o.Scope, root, home)
		if err != nil {
			return usage.Errorf("%v", err)
		}
		res, err := hook.InstallMCP(a, path, argv)
		if err != nil {
			return err
		}
		if res.Changed {
			fmt.Fprintf(f.IO.ErrOut, "wrote   ralph's MCP server (%s mcp) into %s\n", exe, pipelineRel(wd, path))
		} else {
			fmt.Fprintf(f.IO.ErrOut, "kept    %s (ralph's MCP server is already there)\n", pipelineRel(wd, path))
		}
	}
	return nil
}
