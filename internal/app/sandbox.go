package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// SandboxSettings checks the `sandbox:` settings (the user's config and
// the project's, merged by config.LoadLayered) and expands their paths.
// Only the user's own config widens the sandbox: a repository's file
// that would (it may arrive in a pull request) is refused, naming the
// settings and where to put them; so is a writable root or home.
func SandboxSettings(l *config.Layered) (config.Sandbox, error) {
	s := l.Sandbox
	if p := l.ProjectSandbox; p != nil {
		if w := p.Widening(); len(w) > 0 {
			return s, usage.Errorf("%s: sandbox: %s would widen the sandbox, which only your own config (%s) or a flag may do: a file in the repository could otherwise open your machine to whoever wrote it; move the setting there, or remove it",
				l.ProjectSandboxAt, strings.Join(w, ", "), config.UserPath())
		}
	}
	// Paths may name variables ($HOME, $GOPATH); ~ is expanded later.
	for _, l := range []*[]string{&s.Writable, &s.Hidden, &s.Caches} {
		for i, p := range *l {
			(*l)[i] = os.ExpandEnv(p)
		}
	}
	home, _ := os.UserHomeDir()
	for _, w := range s.Writable {
		abs := sandbox.Expand(w)
		if abs == "/" || (home != "" && (abs == home || strings.HasPrefix(home, abs+"/"))) {
			return s, usage.Errorf("sandbox: writable %q would open %s to every agent and gate: your shell's start-up files, your keys and every repository; name the folders a tool needs instead (e.g. ~/.cache/tool)", w, map[bool]string{true: "the whole file system", false: "your home"}[abs == "/"])
		}
	}
	for _, c := range s.Caches {
		if abs := sandbox.Expand(c); abs == "/" || abs == home {
			return s, usage.Errorf("sandbox: caches %q: a cache is a folder tools fill (each sandbox gets a private one in its place), not %s", c, abs)
		}
	}
	if err := sandbox.CheckNetwork(s.Network, false); err != nil {
		return s, usage.Errorf("sandbox: %v", err)
	}
	for name, n := range s.GateNetwork {
		if err := sandbox.CheckNetwork(n, true); err != nil {
			return s, usage.Errorf("sandbox: gate_network %s: %v", name, err)
		}
	}
	return s, nil
}

// SandboxPolicy is the policy of s for a run whose ralph state folder
// is stateDir.
func SandboxPolicy(s config.Sandbox, stateDir string) sandbox.Policy {
	return sandbox.Policy{
		Writable: s.Writable, Caches: s.Caches, Hidden: s.Hidden, AllowHosts: s.AllowHosts,
		AgentNetwork: s.Network, GateNetwork: s.GateNetwork, GateHosts: s.GateHosts, Env: s.Env,
		UserConfig: config.UserPath(), Protect: []string{stateDir}, RecordDir: stateDir,
	}
}

// OpenSandbox readies the sandbox every agent and gate of a run goes
// through, or says why it cannot start (nil, nil: --no-sandbox or
// `enabled: false`).
func OpenSandbox(s config.Sandbox, off bool, paths engine.Paths) (*sandbox.Sandbox, error) {
	if off || (s.Enabled != nil && !*s.Enabled) {
		return nil, nil
	}
	sb, err := sandbox.New(SandboxPolicy(s, paths.Dir))
	if err != nil {
		return nil, usage.Errorf("%v", err)
	}
	return sb, nil
}

// ConfinedGates is gates whose commands run in sb (unchanged without one).
func ConfinedGates(g gate.Runner, sb *sandbox.Sandbox) gate.Runner {
	if sb != nil {
		g.Proc = sb.Gates(g.Proc)
	}
	return g
}

// confinedAgent runs an agent in the sandbox: every process it starts
// (the CLI, a native agent's commands) is confined, it reaches its
// model's API through the sandbox's proxy, and the files the protocol
// asks it to write (its output file, its plan) are written to a scratch
// folder that ralph copies out of, since .ralph is read-only to it.
type confinedAgent struct {
	agent.Agent
	sb      *sandbox.Sandbox
	paths   engine.Paths
	hosts   []string // its model's API
	state   []string // its CLI's own state, bound writable
	adapter string   // whose settings are guarded
}

// Confine wraps a in sb (a itself without a sandbox).
func Confine(a agent.Agent, sb *sandbox.Sandbox, paths engine.Paths, baseURL string, env []string) agent.Agent {
	if sb == nil || a == nil {
		return a
	}
	if _, ok := a.(*confinedAgent); ok {
		return a
	}
	name := a.Name()
	hosts := AgentHosts(name, baseURL, env)
	return &confinedAgent{Agent: a, sb: sb, paths: paths, hosts: hosts, state: sandbox.StateDirs(name), adapter: name}
}

func (c *confinedAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	scratch, err := os.MkdirTemp(sandbox.ScratchRoot(), "ralph-scratch-")
	if err != nil {
		return agent.Result{}, err
	}
	defer os.RemoveAll(scratch)
	use := sandbox.Use{
		Label: "agent " + c.Name(), Dir: req.Dir, Network: c.sb.AgentNetwork, Hosts: c.hosts,
		Writable: []string{scratch, filepath.Join(c.paths.Dir, "agents")}, State: c.state,
		Binds: map[string]string{}, Agent: c.adapter, ReadOnly: req.ReadOnly,
	}
	if req.ItemID != "" {
		use.Label += " · " + req.ItemID
	}
	if req.PromptFile != "" {
		// The prompt and the output file beside it ($RALPH_PROMPT_FILE,
		// $RALPH_OUTPUT_FILE), in the scratch.
		pf := filepath.Join(scratch, filepath.Base(req.PromptFile))
		if err := os.WriteFile(pf, []byte(req.Prompt), 0o600); err != nil {
			return agent.Result{}, err
		}
		req.Env = append(slices.Clone(req.Env), "RALPH_PROMPT_FILE="+pf)
		req.PromptFile = pf
	}
	// The plan a planning iteration writes (.ralph/plans/<item>.md): the
	// folder is shown as a scratch of its own, and only the item's plan
	// is copied out.
	plans := filepath.Join(c.paths.Dir, "plans")
	planScratch := filepath.Join(scratch, "plans")
	if req.ItemID != "" && os.MkdirAll(plans, 0o700) == nil && os.Mkdir(planScratch, 0o700) == nil {
		use.Binds[plans] = planScratch
	}
	// The questions `ralph ask` records (.ralph/asks): the same, and only
	// the file of this item's iteration is copied out.
	asks, askScratch := engine.AskDir(c.paths.Dir), filepath.Join(scratch, "asks")
	if req.ItemID != "" && os.MkdirAll(asks, 0o700) == nil && os.Mkdir(askScratch, 0o700) == nil {
		use.Binds[asks] = askScratch
	}
	ss, err := c.sb.Open(use)
	if err != nil {
		return agent.Result{}, fmt.Errorf("sandbox: %w", err)
	}
	defer ss.Close()
	transcript := req.Transcript
	if transcript != nil {
		fmt.Fprintf(transcript, "[ralph] %s\n", ss.Describe())
		req.Transcript = ss.Watch(transcript)
	}
	res, err := c.Agent.Run(proc.WithConfiner(ctx, ss), req)
	// The CLI's settings are the user's: what the run changed there is
	// put back, and said.
	for _, t := range ss.CheckSettings() {
		if transcript != nil {
			fmt.Fprintf(transcript, "\n[ralph] tamper_detected: the agent %s %s; ralph put it back\n", t.What, t.Path)
		}
	}
	if req.ItemID != "" {
		plan := engine.PlanFile(c.paths, req.ItemID)
		ask := engine.AskFile(c.paths.Dir, req.ItemID, req.Iteration)
		for scratchDir, file := range map[string]string{planScratch: plan, askScratch: ask} {
			if b, rerr := store.ReadFileLimit(filepath.Join(scratchDir, filepath.Base(file)), 1<<20); rerr == nil {
				if werr := store.WriteFile(file, b, 0o644); werr != nil && err == nil {
					err = werr
				}
			}
		}
	}
	if transcript != nil {
		if denied := ss.Denied(); len(denied) > 0 {
			fmt.Fprintf(transcript, "\n[ralph] sandbox denied network access to %s\n", strings.Join(denied, ", "))
		}
		for _, n := range ss.Notes() {
			fmt.Fprintf(transcript, "%s\n", n)
		}
	}
	return res, err
}

// AgentHosts is an agent's model API: its base URL's host (given, or in
// $RALPH_<NAME>_BASE_URL), else the adapter's own hosts, and the hosts of
// the *_BASE_URL variables that point a CLI elsewhere.
func AgentHosts(name, baseURL string, env []string) []string {
	var hosts []string
	base := baseURL
	if base == "" {
		base = os.Getenv("RALPH_" + strings.ToUpper(name) + "_BASE_URL")
	}
	if base != "" {
		hosts = append(hosts, sandbox.HostOf(base))
	} else {
		hosts = append(hosts, sandbox.ModelHosts(name)...)
	}
	lookup := func(k string) string {
		for _, kv := range slices.Backward(env) {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return os.Getenv(k)
	}
	for _, k := range sandbox.BaseURLEnv {
		if h := sandbox.HostOf(lookup(k)); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// ConfineWorker puts a worker's jobs in the sandbox: the worker's folder
// (its clone and trees) is read-only but for the job's tree and git's
// folders. Only the user's config is read (the worker has no project of
// its own); baseURL and env are the worker's agent flags'.
func ConfineWorker(w *cluster.Worker, dir string, off bool, baseURL string, env []string) error {
	user, err := config.LoadLayered("") // the user's file alone
	if err != nil {
		return usage.Errorf("%v", err)
	}
	s, err := SandboxSettings(user)
	if err != nil {
		return err
	}
	if off || (s.Enabled != nil && !*s.Enabled) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sb, err := sandbox.New(SandboxPolicy(s, dir))
	if err != nil {
		return usage.Errorf("%v", err)
	}
	paths := engine.PathsFor(dir)
	paths.Dir = dir
	w.ConfineAgent = func(a agent.Agent, base string) agent.Agent {
		if base == "" {
			base = baseURL
		}
		return Confine(a, sb, paths, base, env)
	}
	w.ConfineGates = sb.Gates
	return nil
}

// InSandbox is ag, an agent run once outside a loop (prd import, plan),
// in the repository dir's sandbox as l's settings make it (ag itself with
// off or `enabled: false`).
func InSandbox(l *config.Layered, ag agent.Agent, dir string, off bool, baseURL string, env []string) (agent.Agent, error) {
	s, err := SandboxSettings(l)
	if err != nil {
		return nil, err
	}
	paths := engine.PathsFor(dir)
	sb, err := OpenSandbox(s, off, paths)
	if err != nil {
		return nil, err
	}
	return Confine(ag, sb, paths, baseURL, env), nil
}
