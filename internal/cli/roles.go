package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/usage"
)

// RolesOptions are `ralph roles`' settings.
type RolesOptions struct {
	IO   *Factory
	Name string // show: the role
}

// newCmdRoles builds `ralph roles list|show`.
func newCmdRoles(f *Factory, runF func(*RolesOptions) error) *cobra.Command {
	opts := &RolesOptions{IO: f}
	cmd := &cobra.Command{
		Use: "roles",
		Example: `  ralph roles list
  ralph roles show reviewer`,
		Short: "The role texts and triggers in force",
		Long: `Roles change how an iteration thinks: when a trigger's condition holds
between iterations, the role's text is appended to the prompt after a line
"---" (as the role-trigger system's build_prompt does). Built-in roles: reviewer, architect,
debugger, documenter, refactorer. roles/<name>.md (the role-trigger system's layout) and
.ralph/roles/<name>.md override them or add new ones, the latter winning.

Triggers live in .ralph/roles.yaml or the role-trigger system's config/roles.yaml:

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
		Use:     "list",
		Example: `  ralph roles list`,
		Short:   "List the roles, triggers and per-role agents in force, and where each comes from",
		Args:    cobra.NoArgs,
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
			if len(rs.Council) > 0 {
				fmt.Fprintf(out, "\nCouncil rules (%s; an item that matches one, or has critical: true, needs a council's majority):\n", relOr(root, rs.TriggersFrom))
				for i, t := range rs.Council {
					fmt.Fprintf(out, "  %d. %s (line %d)\n", i+1, t.Condition, t.Line)
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
		Use:     "show NAME",
		Example: `  ralph roles show reviewer`,
		Short:   "Print a role's text and where it comes from",
		Args:    cobra.ExactArgs(1),
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
				return usage.Errorf("no role %q: the roles in force are %s", opts.Name, strings.Join(rs.Names(), ", "))
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
	rs, err := app.LoadRoles(root)
	return root, rs, err
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

// agentChooser resolves the agent of each iteration, each setting on its
// own: a flag given on the command line wins, then the item's own agent
// and model fields (a story's, a task's), then the role's entry in
// roles.yaml, then the config file and the defaults (the run's agent). A
// model given at no level above the config's is the config's only when
// the agent is the config's too. Adapters are built once per setting.
func (o *RunOptions) agentChooser(rs *roles.Set, def agent.Agent) func(it *engine.Item, role string) (engine.AgentChoice, error) {
	var mu sync.Mutex
	built := map[[3]string]engine.AgentChoice{}
	flag := func(name string) bool { return o.flagSet != nil && o.flagSet(name) }
	return func(it *engine.Item, role string) (engine.AgentChoice, error) {
		run := engine.AgentChoice{Agent: def, Name: o.Agent, Model: o.Model, From: "the run's agent"}
		var spec roles.AgentSpec
		specFrom := ""
		if s, ok := rs.Agents[role]; ok && role != "" {
			spec, specFrom = s, fmt.Sprintf("%s agents.%s", relOr(o.root, rs.TriggersFrom), role)
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

// checkItemAgents names, before anything runs, an item whose agent field
// is no agent ralph knows.
func checkItemAgents(src engine.Source) error {
	for _, it := range src.Items() {
		if it.Agent != "" && !slices.Contains(agent.Names(), it.Agent) {
			return usage.Errorf("%s: %s %s: agent %q is not one ralph knows (%s)", src.Info().Path, it.Kind, it.ID, it.Agent, strings.Join(agent.Names(), ", "))
		}
	}
	return nil
}
