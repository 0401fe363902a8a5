package cli

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/config"
)

// AgentFlags choose and build the agent of every command that runs one
// (`ralph run`, `ralph prd import`): the same flags, the same config keys.
type AgentFlags = app.AgentSpec

// registerAgentFlags puts the agent flags on fl.
func registerAgentFlags(fl *pflag.FlagSet, a *AgentFlags) {
	fl.StringVar(&a.Agent, "agent", "", "agent `NAME`: "+strings.Join(agent.Names(), ", ")+" (default claude)")
	fl.StringVar(&a.AgentCmd, "agent-cmd", "", "for --agent cmd: the program and its arguments (`ARGV`), split like a shell would (prompt on stdin and in $RALPH_PROMPT_FILE)")
	fl.StringArrayVar(&a.AgentArgs, "agent-arg", nil, "extra `ARG` for the agent CLI (repeatable)")
	fl.StringVar(&a.Script, "script", "", "for --agent scripted: the script `FILE`")
	fl.StringVar(&a.Model, "model", "", "model `NAME` passed to the agent")
	fl.StringVar(&a.BaseURL, "base-url", "", "API endpoint `URL` for the agent (native, claude, codex, opencode, gemini, copilot)")
	fl.StringVar(&a.Provider, "provider", "", "for --agent native, and copilot with --base-url: the `API` of the endpoint, anthropic or openai")
}

// applyAgentConfig fills the agent settings not given as flags from
// .ralph/config.yaml; the agent defaults to claude.
func applyAgentConfig(a *AgentFlags, c *config.Config, set func(string) bool) {
	str := func(dst *string, name, v string) {
		if !set(name) && v != "" {
			*dst = v
		}
	}
	str(&a.Agent, "agent", c.Agent)
	str(&a.AgentCmd, "agent-cmd", c.AgentCmd)
	str(&a.Script, "script", c.Script)
	str(&a.Model, "model", c.Model)
	str(&a.BaseURL, "base-url", c.BaseURL)
	str(&a.Provider, "provider", c.Provider)
	if !set("agent-arg") && len(c.AgentArgs) > 0 {
		a.AgentArgs = c.AgentArgs
	}
	if a.Agent == "" {
		a.Agent = "claude"
	}
	a.APIKeyEnv = c.APIKeyEnv
	a.Env = append(a.Env, sortedPairs(c.Env)...)
}
