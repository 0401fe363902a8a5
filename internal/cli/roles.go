package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/app"
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

// relOr is p relative to root where it can be.
func relOr(root, p string) string { return app.RelOr(root, p) }

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
