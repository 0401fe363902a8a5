package app

import (
	"testing"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/roles"
)

// TestAgentPrecedence: each agent setting comes from the first level that
// gives it — flags, the item's own fields, the role's roles.yaml entry,
// the config — and a level's model never goes to another level's agent.
func TestAgentPrecedence(t *testing.T) {
	rs := &roles.Set{TriggersFrom: "/r/.ralph/roles.yaml", Agents: map[string]roles.AgentSpec{
		"reviewer":  {Agent: "codex", Model: "m-role"},
		"architect": {Model: "m-arch"},
	}}
	type precedenceCase struct {
		name  string
		flags []string
		item  engine.Item
		role  string
		agent string
		model string
		from  string
	}
	cases := []precedenceCase{
		{"config", nil, engine.Item{}, "", "claude", "m-config", "the run's agent"},
		{"role", nil, engine.Item{}, "reviewer", "codex", "m-role", ".ralph/roles.yaml agents.reviewer"},
		{"role model only", nil, engine.Item{}, "architect", "claude", "m-arch", ".ralph/roles.yaml agents.architect"},
		// An item's own agent sets its worker, not its reviewer or council.
		{"item sets its worker", nil, engine.Item{Kind: "story", ID: "S-1", Agent: "gemini", Model: "m-item"}, "", "gemini", "m-item", "story S-1's agent field, story S-1's model field"},
		{"item is not its reviewer", nil, engine.Item{Kind: "story", ID: "S-1", Agent: "gemini", Model: "m-item"}, "reviewer", "codex", "m-role", ".ralph/roles.yaml agents.reviewer"},
		{"item model is not its reviewer's", nil, engine.Item{Kind: "task", ID: "A", Model: "m-item"}, "reviewer", "codex", "m-role", ".ralph/roles.yaml agents.reviewer"},
		{"item is not its council", nil, engine.Item{Kind: "story", ID: "S-1", Agent: "opencode"}, "council", "claude", "m-config", "the run's agent"},
		{"item agent is the config's", nil, engine.Item{Kind: "story", ID: "S-1", Agent: "claude"}, "", "claude", "m-config", "story S-1's agent field"},
		// The agent flags set the worker's agent; a role's own wins for it.
		{"flag agent over item", []string{"agent"}, engine.Item{Kind: "story", ID: "S-1", Agent: "gemini", Model: "m-item"}, "", "claude", "m-config", "--agent (flags win over the story S-1's agent field)"},
		{"role over flag agent", []string{"agent"}, engine.Item{Kind: "story", ID: "S-1"}, "reviewer", "codex", "m-role", ".ralph/roles.yaml agents.reviewer (a role's own agent wins over --agent; --agent-all gives every role the flags' agent)"},
		{"flag agent for a role without its own", []string{"agent", "model"}, engine.Item{Kind: "story", ID: "S-1"}, "debugger", "claude", "m-config", "--agent"},
		{"flag model over item", []string{"model"}, engine.Item{Kind: "story", ID: "S-1", Agent: "gemini", Model: "m-item"}, "", "gemini", "m-config", "story S-1's agent field, --model"},
	}
	cases = append(cases, precedenceCase{"agent-all over role", []string{"agent", "agent-all"}, engine.Item{Kind: "story", ID: "S-1"}, "reviewer", "claude", "m-config", "--agent-all (flags win over .ralph/roles.yaml agents.reviewer)"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &Options{AgentSpec: AgentSpec{Agent: "claude", Model: "m-config"}}
			for _, f := range c.flags {
				o.AgentAll = o.AgentAll || f == "agent-all"
			}
			o.FlagSet = func(name string) bool {
				for _, f := range c.flags {
					if f == name {
						return true
					}
				}
				return false
			}
			def, err := agent.New("claude", agent.Options{Model: o.Model})
			if err != nil {
				t.Fatal(err)
			}
			choose := o.AgentChooser("/r", rs, def)
			got, err := choose(&c.item, c.role)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != c.agent || got.Model != c.model || got.From != c.from {
				t.Fatalf("got agent %q model %q from %q; want %q %q from %q", got.Name, got.Model, got.From, c.agent, c.model, c.from)
			}
			if got.Agent == nil || got.Agent.Name() != c.agent {
				t.Fatalf("adapter %v is not %s", got.Agent, c.agent)
			}
		})
	}
}
