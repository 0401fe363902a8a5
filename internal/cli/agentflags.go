package cli

import (
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/usage"
)

// AgentFlags choose and build the agent of every command that runs one
// (`ralph run`, `ralph prd import`): the same flags, the same config keys.
type AgentFlags struct {
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

func (a *AgentFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&a.Agent, "agent", "", "agent `NAME`: "+strings.Join(agent.Names(), ", ")+" (default claude)")
	fl.StringVar(&a.AgentCmd, "agent-cmd", "", "for --agent cmd: the program and its arguments (`ARGV`), split like a shell would (prompt on stdin and in $RALPH_PROMPT_FILE)")
	fl.StringArrayVar(&a.AgentArgs, "agent-arg", nil, "extra `ARG` for the agent CLI (repeatable)")
	fl.StringVar(&a.Script, "script", "", "for --agent scripted: the script `FILE`")
	fl.StringVar(&a.Model, "model", "", "model `NAME` passed to the agent")
	fl.StringVar(&a.BaseURL, "base-url", "", "API endpoint `URL` for the agent (native, claude, codex, opencode, gemini, copilot)")
	fl.StringVar(&a.Provider, "provider", "", "for --agent native, and copilot with --base-url: the `API` of the endpoint, anthropic or openai")
}

// applyConfig fills the agent settings not given as flags from
// .ralph/config.yaml; the agent defaults to claude.
func (a *AgentFlags) applyConfig(c *config.Config, set func(string) bool) {
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

func (a *AgentFlags) build() (agent.Agent, error) {
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
