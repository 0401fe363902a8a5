package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/roles"
)

// RolesOptions are `ralph roles`' settings.
type RolesOptions struct {
	IO   *Factory
	Name string // show: the role
}

// NewCmdRoles builds `ralph roles list|show`.
func NewCmdRoles(f *Factory, runF func(*RolesOptions) error) *cobra.Command {
	opts := &RolesOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "roles",
		Short: "The role texts and triggers in force",
		Long: `Roles change how an iteration thinks: when a trigger's condition holds
between iterations, the role's text is appended to the prompt after a line
"---" (seed 003's build_prompt). Built-in roles: reviewer, architect,
debugger, documenter, refactorer. roles/<name>.md (the seed's layout) and
.ralph/roles/<name>.md override them or add new ones, the latter winning.

Triggers live in .ralph/roles.yaml or the seed's config/roles.yaml:

  triggers:
    - condition: "branch_commits >= 5"
      role: "reviewer"
    - condition: "task_marked_ready_to_complete"
      role: "reviewer"
  agents:
    reviewer: {agent: codex, model: gpt-5}

Conditions are expressions (expr-lang) over: ` + strings.Join(roles.Facts(), ", ") + `.
They are evaluated in order, first match wins. A trigger that mentions
task_marked_ready_to_complete is a completion gate: asked when a claim has
passed the gates, its role must then approve (REVIEW: approve) before the
item passes.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the roles, triggers and per-role agents in force, and where each comes from",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			root, rs, err := repoRoles(c, f)
			if err != nil {
				return err
			}
			out := f.IO.Out
			fmt.Fprintln(out, "Roles:")
			for _, n := range rs.Names() {
				r, _ := rs.Get(n)
				fmt.Fprintf(out, "  %-12s %s\n", n, relOr(root, r.From))
			}
			if rs.TriggersFrom == "" {
				fmt.Fprintln(out, "\nTriggers: none (add .ralph/roles.yaml or config/roles.yaml); no iteration gets a role.")
			} else {
				fmt.Fprintf(out, "\nTriggers (%s; in order, first match wins):\n", relOr(root, rs.TriggersFrom))
				for i, t := range rs.Triggers {
					gate := ""
					if t.OnReady {
						gate = "  [completion gate: the role must approve]"
					}
					fmt.Fprintf(out, "  %d. %s → %s (line %d)%s\n", i+1, t.Condition, t.Role, t.Line, gate)
				}
			}
			if len(rs.Agents) > 0 {
				fmt.Fprintln(out, "\nAgents by role:")
				for _, n := range rs.Names() {
					if a, ok := rs.Agents[n]; ok {
						fmt.Fprintf(out, "  %-12s %s\n", n, agentSpecText(a))
					}
				}
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "show NAME",
		Short: "Print a role's text and where it comes from",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			root, rs, err := repoRoles(c, f)
			if err != nil {
				return err
			}
			r, ok := rs.Get(opts.Name)
			if !ok {
				return engine.UsageError("no role %q: the roles in force are %s", opts.Name, strings.Join(rs.Names(), ", "))
			}
			fmt.Fprintf(f.IO.ErrOut, "ralph: role %s from %s\n", r.Name, relOr(root, r.From))
			fmt.Fprint(f.IO.Out, strings.TrimRight(r.Text, "\n")+"\n")
			return nil
		},
	})
	return cmd
}

// repoRoles finds the repository and reads the roles in force there.
func repoRoles(c *cobra.Command, f *Factory) (string, *roles.Set, error) {
	root, _, err := f.Repo(c.Context())
	if err != nil {
		return "", nil, err
	}
	rs, err := loadRoles(root)
	return root, rs, err
}

// loadRoles reads the roles in force; a bad file is a usage error (exit 2).
func loadRoles(root string) (*roles.Set, error) {
	rs, err := roles.Load(root)
	if err != nil {
		return nil, engine.UsageError("%v", err)
	}
	return rs, nil
}

func relOr(root, p string) string {
	if p == roles.BuiltinFrom {
		return p
	}
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

func agentSpecText(a roles.AgentSpec) string {
	var parts []string
	if a.Agent != "" {
		parts = append(parts, "agent "+a.Agent)
	}
	if a.AgentCmd != "" {
		parts = append(parts, fmt.Sprintf("agent_cmd %q", a.AgentCmd))
	}
	if a.Model != "" {
		parts = append(parts, "model "+a.Model)
	}
	return strings.Join(parts, ", ")
}

// agentChooser resolves the agent of each iteration: a flag given on the
// command line wins, then the role's entry in roles.yaml, then the config
// file and the defaults (the run's agent). Adapters are built once per
// role.
func (o *RunOptions) agentChooser(rs *roles.Set, def agent.Agent) func(it *engine.Item, role string) (engine.AgentChoice, error) {
	var mu sync.Mutex
	built := map[string]engine.AgentChoice{}
	return func(it *engine.Item, role string) (engine.AgentChoice, error) {
		run := engine.AgentChoice{Agent: def, Name: o.Agent, Model: o.Model, From: "the run's agent"}
		spec, ok := rs.Agents[role]
		if role == "" || !ok {
			return run, nil
		}
		from := fmt.Sprintf("%s agents.%s", relOr(o.root, rs.TriggersFrom), role)
		if o.flagSet != nil && o.flagSet("agent") {
			run.From = "--agent (flags win over roles.yaml " + "agents." + role + ")"
			return run, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if c, ok := built[role]; ok {
			return c, nil
		}
		name, model := o.Agent, o.Model
		if spec.Agent != "" {
			name = spec.Agent
		}
		if spec.Model != "" && !(o.flagSet != nil && o.flagSet("model")) {
			model = spec.Model
		}
		ao := agent.Options{Script: o.Script, Model: model, Args: o.AgentArgs, BaseURL: o.BaseURL, Provider: o.Provider, APIKeyEnv: o.APIKeyEnv}
		cmdline := spec.AgentCmd
		if cmdline == "" && name == o.Agent {
			cmdline = o.AgentCmd
		}
		if name == "cmd" && cmdline != "" {
			argv, err := proc.SplitArgs(cmdline)
			if err != nil {
				return run, fmt.Errorf("%s: agent_cmd: %v", from, err)
			}
			ao.Command = argv
		}
		a, err := agent.New(name, ao)
		if err != nil {
			return run, fmt.Errorf("%s: %v", from, err)
		}
		c := engine.AgentChoice{Agent: a, Name: name, Model: model, From: from}
		built[role] = c
		return c, nil
	}
}
