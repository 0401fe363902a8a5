package app

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// PresetNova names Nova26's loop as a preset (--preset nova).
const PresetNova = "nova"

// RelOr is p relative to root where it can be (a built-in role's
// origin as is).
func RelOr(root, p string) string {
	if p == roles.BuiltinFrom {
		return p
	}
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

// AgentChooser resolves the agent of each iteration, each setting on its
// own: a flag given on the command line wins, then the item's own agent
// and model fields (a story's, a task's), then the role's entry in
// roles.yaml, then the config file and the defaults (the run's agent). A
// model given at no level above the config's is the config's only when
// the agent is the config's too. Adapters are built once per setting.
func (o *Options) AgentChooser(root string, rs *roles.Set, def agent.Agent) func(it *engine.Item, role string) (engine.AgentChoice, error) {
	var mu sync.Mutex
	built := map[[3]string]engine.AgentChoice{}
	flag := o.flag
	return func(it *engine.Item, role string) (engine.AgentChoice, error) {
		run := engine.AgentChoice{Agent: def, Name: o.Agent, Model: o.Model, From: "the run's agent"}
		var spec roles.AgentSpec
		specFrom := ""
		if s, ok := rs.Agents[role]; ok && role != "" {
			spec, specFrom = s, fmt.Sprintf("%s agents.%s", RelOr(root, rs.TriggersFrom), role)
		}
		itemFrom := ""
		if it != nil {
			itemFrom = fmt.Sprintf("%s %s's", it.Kind, it.ID)
		}
		// Each setting from the first level that gives it. The agent
		// flags and an item's own agent set the worker's agent; a role's
		// own agent (roles.yaml agents:) wins for that role unless
		// --agent-all; an item's agent is never its reviewer's or its
		// council's.
		worker := role == ""
		flagsWin := worker || o.AgentAll
		name, nameFrom, fromSpec, note := o.Agent, "", false, ""
		switch {
		case flag("agent") && (flagsWin || spec.Agent == ""):
			nameFrom = "--agent"
		case worker && it != nil && it.Agent != "":
			name, nameFrom = it.Agent, itemFrom+" agent field"
		case spec.Agent != "":
			name, nameFrom, fromSpec = spec.Agent, specFrom, true
			if flag("agent") {
				note = " (a role's own agent wins over --agent; --agent-all gives every role the flags' agent)"
			}
		}
		model, modelFrom := "", ""
		switch {
		case flag("model") && (flagsWin || (spec.Agent == "" && spec.Model == "")):
			model, modelFrom = o.Model, "--model"
		// A level's model goes with its own agent: it is not handed to
		// another agent a higher level chose.
		case worker && it != nil && it.Model != "" && (it.Agent == "" || it.Agent == name):
			model, modelFrom = it.Model, itemFrom+" model field"
		case spec.Model != "" && (spec.Agent == "" || spec.Agent == name):
			model, modelFrom = spec.Model, specFrom
		case name == o.Agent:
			model = o.Model
		}
		cmdline := ""
		switch {
		case fromSpec && spec.AgentCmd != "":
			cmdline = spec.AgentCmd
		case name == o.Agent:
			cmdline = o.AgentCmd
		}
		if nameFrom == "--agent" {
			switch {
			case worker && it != nil && it.Agent != "":
				nameFrom = "--agent (flags win over the " + itemFrom + " agent field)"
			case spec.Agent != "":
				nameFrom = "--agent-all (flags win over " + specFrom + ")"
			}
		}
		if name == o.Agent && model == o.Model && cmdline == o.AgentCmd {
			if nameFrom != "" {
				run.From = nameFrom
			} else if modelFrom != "" && modelFrom != "--model" {
				run.From = modelFrom
			}
			return run, nil
		}
		var from []string
		for _, f := range []string{nameFrom, modelFrom} {
			if f != "" && !slices.Contains(from, f) {
				from = append(from, f)
			}
		}
		key := [3]string{name, model, cmdline}
		mu.Lock()
		defer mu.Unlock()
		where := strings.Join(from, ", ") + note
		if c, ok := built[key]; ok {
			c.From = where
			return c, nil
		}
		ao := agent.Options{Script: o.Script, Model: model, Args: o.AgentArgs, BaseURL: o.BaseURL, Provider: o.Provider, APIKeyEnv: o.APIKeyEnv}
		if name == "cmd" {
			if cmdline == "" {
				return run, fmt.Errorf("%s: agent cmd needs agent_cmd (in roles.yaml agents.%s, or --agent-cmd)", where, role)
			}
			argv, err := proc.SplitArgs(cmdline)
			if err != nil {
				return run, fmt.Errorf("%s: agent_cmd: %v", where, err)
			}
			ao.Command = argv
		}
		a, err := agent.New(name, ao)
		if err != nil {
			return run, fmt.Errorf("%s: %v", where, err)
		}
		c := engine.AgentChoice{Agent: a, Name: name, Model: model, From: where}
		built[key] = c
		return c, nil
	}
}

// CheckItemAgents names, before anything runs, an item whose agent field
// is no agent ralph knows.
func CheckItemAgents(src engine.Source) error {
	for _, it := range src.Items() {
		if it.Agent != "" && !slices.Contains(agent.Names(), it.Agent) {
			return usage.Errorf("%s: %s %s: agent %q is not one ralph knows (%s)", src.Info().Path, it.Kind, it.ID, it.Agent, strings.Join(agent.Names(), ", "))
		}
	}
	return nil
}

// Check is one thing a run needs: what was looked at, what was
// found, or what is wrong with the fix in the message.
type Check struct {
	Name  string
	Found string
	Err   error
}

// Preflight checks, before a run writes anything, what it will need: the
// agent can start (its CLI installed, and which version; its command, key
// or script), every gate's program resolves, and git knows who commits.
// `ralph doctor` prints the same checks, and more.
func Preflight(ctx context.Context, root string, repo *git.Repo, ags []NamedAgent, commands []string) []Check {
	var out []Check
	for _, a := range ags {
		c, ok := a.agent.(agent.Checker)
		if !ok || a.same {
			continue
		}
		found, err := c.Check(ctx, a.model)
		out = append(out, Check{Name: a.what, Found: found, Err: err})
	}
	for _, p := range gate.Programs(commands) {
		path, err := agent.LookProgram(p, root)
		out = append(out, Check{Name: "gate program " + p, Found: path, Err: err})
	}
	id, err := repo.Identity(ctx)
	if err != nil {
		err = fmt.Errorf("git does not know who commits (ralph's commits would be by ralph <ralph@localhost>): git config --global user.name \"Your Name\" && git config --global user.email you@example.com")
	}
	out = append(out, Check{Name: "git identity", Found: id, Err: err})
	return out
}

// NamedAgent is an agent a run will start, for the preflight.
type NamedAgent struct {
	what  string // "agent claude", "summarizer native"
	agent agent.Agent
	model string
	same  bool // the run's own agent again: checked once
}

// Agent is the agent itself.
func (a NamedAgent) Agent() agent.Agent { return a.agent }

// RoleAgents are the agents roles.yaml names for its roles (agents:),
// when they are not the run's own: the preflight checks them too. A
// setting that cannot be built is a check that fails.
func (o *Options) RoleAgents(root string, rs *roles.Set, run agent.Agent) []NamedAgent {
	if rs == nil {
		return nil
	}
	choose := o.AgentChooser(root, rs, run)
	var out []NamedAgent
	for _, role := range slices.Sorted(maps.Keys(rs.Agents)) {
		c, err := choose(nil, role)
		what := "role " + role + " agent"
		if err != nil {
			out = append(out, NamedAgent{what: what, agent: failedAgent{err}})
			continue
		}
		if c.Agent != nil && c.Agent != run {
			out = append(out, NamedAgent{what: what + " " + c.Name, agent: c.Agent, model: c.Model})
		}
	}
	return out
}

// failedAgent is an agent setting that could not be built: its check
// says why.
type failedAgent struct{ err error }

func (f failedAgent) Name() string { return "" }

func (f failedAgent) Plan(agent.Request) (agent.Invocation, error) { return agent.Invocation{}, f.err }

func (f failedAgent) Run(context.Context, agent.Request) (agent.Result, error) {
	return agent.Result{}, f.err
}

func (f failedAgent) Check(context.Context, string) (string, error) { return "", f.err }

// PreflightError is the usage error of a failed preflight: one line per
// problem, with its fix.
func PreflightError(checks []Check) error {
	var lines []string
	for _, c := range checks {
		if c.Err != nil {
			lines = append(lines, "  "+c.Name+": "+c.Err.Error())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return usage.Errorf("preflight: %d problem(s), nothing was started:\n%s\n(`ralph doctor` runs every check)", len(lines), strings.Join(lines, "\n"))
}

// RunAgents are the agents a run starts up front: its own, then the
// progress summariser (the run's own agent, or another).
func (o *Options) RunAgents() ([]NamedAgent, error) {
	ag, err := o.AgentSpec.Build()
	if err != nil {
		return nil, err
	}
	ags := []NamedAgent{{what: "agent " + o.Agent, agent: ag, model: o.Model}}
	sum, model, err := o.summarizer(ag)
	if err != nil {
		return ags, err
	}
	what := "summarizer " + o.Summarizer
	if o.Summarizer == "" {
		what = "summarizer (the run's agent)"
	}
	return append(ags, NamedAgent{what: what, agent: sum, model: model, same: sum == ag}), nil
}

// TreeCheck is the verdict a new run gives the work tree
// (engine.CheckStartTree), or why a run would not look at it: a resume
// keeps the tree its run left.
func (o *Options) TreeCheck(ctx context.Context, root string, repo *git.Repo, info engine.SourceInfo) Check {
	c := Check{Name: "work tree"}
	p := engine.PathsFor(root)
	if saved, _, err := engine.LoadOrRebuildState(p); err == nil && saved != nil && !o.Fresh &&
		saved.Source == info.Kind && saved.SourcePath == info.Path && saved.Status != engine.StatusComplete {
		c.Found = fmt.Sprintf("not checked: the next `ralph run` resumes run %s (`ralph run --fresh` would check it)", saved.RunID)
		return c
	}
	tree, err := engine.CheckStartTree(ctx, repo, root, info, SetupFiles())
	switch {
	case err != nil:
		c.Err = err
	case o.AllowDirty:
		c.Found = fmt.Sprintf("%d uncommitted change(s), allowed (--allow-dirty)", len(tree.Refused))
	default:
		c.Err = tree.Err()
		c.Found = "clean"
		if len(tree.Kept) > 0 {
			c.Found = fmt.Sprintf("clean but for ralph's own %s (never committed by a run)", strings.Join(tree.Kept, ", "))
		}
	}
	return c
}

// SetupFiles are the files ralph's own commands write into a repository
// that a new run accepts uncommitted (engine.StartConfig.Setup).
func SetupFiles() []string { return hook.ProjectMCPFiles() }

// CLIHostsChecks name the hosts the agent CLI's own configuration sends
// it to (when ralph gives it no base URL): each must be allowed in the
// user's config, or every iteration would end at a 403 from ralph's
// proxy, an attempt spent each time.
func (o *Options) CLIHostsChecks() []Check {
	if o.NoSandbox || (o.SandboxConfig.Enabled != nil && !*o.SandboxConfig.Enabled) || o.SandboxConfig.Network == sandbox.NetHost ||
		o.BaseURL != "" || os.Getenv("RALPH_"+strings.ToUpper(o.Agent)+"_BASE_URL") != "" {
		return nil
	}
	allowed := append(slices.Clone(o.SandboxConfig.AllowHosts), AgentHosts(o.Agent, o.BaseURL, o.Env)...)
	var out []Check
	for _, h := range sandbox.CLIHosts(o.Agent) {
		c := Check{Name: "agent " + o.Agent + "'s own endpoint"}
		name, _, _ := strings.Cut(h.Host, ":")
		if sandbox.Allowed(allowed, h.Host) {
			c.Found = fmt.Sprintf("%s, set in %s, allowed", h.Host, h.From)
		} else {
			c.Err = fmt.Errorf("%s sends %s to %s, which the sandbox does not allow: every iteration would fail at ralph's proxy; if you trust it, allow it once with `allow_hosts: [%s]` under `sandbox:` in %s",
				h.From, o.Agent, h.Host, name, config.UserPath())
		}
		out = append(out, c)
	}
	return out
}

// confine is a of this run, in the run's sandbox. The coordinator's
// remote agent is not confined here: its workers confine the real one.
func (o *opener) confine(a agent.Agent, paths engine.Paths) agent.Agent {
	if _, remote := a.(*cluster.RemoteAgent); remote {
		return a
	}
	return Confine(a, o.sandbox, paths, o.BaseURL, o.Env)
}

// confinedChooser confines every agent choose picks (roles, resolvers,
// council members).
func (o *opener) confinedChooser(choose func(*engine.Item, string) (engine.AgentChoice, error), paths engine.Paths) func(*engine.Item, string) (engine.AgentChoice, error) {
	return func(it *engine.Item, role string) (engine.AgentChoice, error) {
		c, err := choose(it, role)
		if err == nil {
			c.Agent = o.confine(c.Agent, paths)
		}
		return c, err
	}
}

// presetIterations is the run's iteration bound under the preset, once
// the source's items are known (0: the engine's default).
func (o *Options) presetIterations(src engine.Source) int {
	if o.Preset != PresetNova || o.flag("max-iterations") {
		return 0
	}
	return 3 * len(src.Items())
}

func ParseGates(specs []string) ([]gate.Gate, error) {
	var out []gate.Gate
	for i, s := range specs {
		name, cmd, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsAny(name, " \t'\"") {
			name, cmd = fmt.Sprintf("gate%d", i+1), s
		}
		name, cmd = strings.TrimSpace(name), strings.TrimSpace(cmd)
		if name == "" || cmd == "" {
			return nil, usage.Errorf("--gate %q: use NAME=COMMAND", s)
		}
		out = append(out, gate.Gate{Name: name, Command: cmd})
	}
	return out, nil
}

// AgentSpec is the agent a command runs (`ralph run`, `ralph prd
// import`): what its flags and config keys say.
type AgentSpec struct {
	Agent     string
	AgentCmd  string
	AgentArgs []string
	Script    string
	Model     string
	BaseURL   string
	Provider  string
	APIKeyEnv string
	Env       []string // extra agent environment from config env:
}

// Build makes the agent a names.
func (a *AgentSpec) Build() (agent.Agent, error) {
	if err := checkBaseURL(a.BaseURL); err != nil {
		return nil, err
	}
	ao := agent.Options{Script: a.Script, Model: a.Model, Args: a.AgentArgs, BaseURL: a.BaseURL, Provider: a.Provider, APIKeyEnv: a.APIKeyEnv}
	if a.Agent == "cmd" && a.AgentCmd != "" {
		argv, err := proc.SplitArgs(a.AgentCmd)
		if err != nil {
			return nil, usage.Errorf("--agent-cmd: %v", err)
		}
		ao.Command = argv
	}
	ag, err := agent.New(a.Agent, ao)
	if err != nil {
		return nil, usage.Errorf("%v", err)
	}
	return ag, nil
}

// checkBaseURL refuses an API endpoint no agent could reach, before
// anything starts: an agent CLI given one retries for minutes.
func checkBaseURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case u.Scheme != "http" && u.Scheme != "https":
		why = "want an http:// or https:// URL"
	case u.Hostname() == "":
		why = "it names no host"
	case strings.HasSuffix(u.Host, ":"):
		why = "a colon with no port after it"
	}
	if why != "" {
		return usage.Errorf("--base-url %q (base_url in config): %s, e.g. http://127.0.0.1:8080", raw, why)
	}
	return nil
}
