package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/engine"
)

// sandboxCheck is doctor's word on the sandbox: that it starts here, and
// what it allows the run's agent and gates.
func (o *RunOptions) sandboxCheck(root string) app.Check {
	c := app.Check{Name: "sandbox"}
	sb, err := app.OpenSandbox(o.SandboxConfig, o.NoSandbox, engine.PathsFor(root))
	switch {
	case err != nil:
		c.Err = err
	case sb == nil:
		c.Found = "off (--no-sandbox or sandbox.enabled: false): agents and gates can write anywhere you can and reach any host"
	default:
		c.Found = sb.Explain(app.AgentHosts(o.Agent, o.BaseURL, o.Env))
	}
	return c
}

// oneOffAgent is the agent the flags a name for a command that runs one
// agent outside a loop (prd import, plan): the config's settings fill the
// flags not given, and it runs in the repository's sandbox.
func oneOffAgent(f *Factory, a *AgentFlags, dir string, noSandbox bool, set func(string) bool) (agent.Agent, error) {
	l, err := f.Settings(dir)
	if err != nil {
		return nil, err
	}
	applyAgentConfig(a, l.Config, set)
	ag, err := a.Build()
	if err != nil {
		return nil, err
	}
	return app.InSandbox(l, ag, dir, noSandbox, a.BaseURL, a.Env)
}

// oneOffFailure says why a one-off agent run (who: "the prep agent")
// gave no answer, or nil when it did.
func oneOffFailure(who string, ag agent.Agent, res agent.Result, err error, timeout time.Duration, transcript string) error {
	switch {
	case err != nil:
		return fmt.Errorf("%s (%s): %w", who, ag.Name(), err)
	case res.RateLimit != nil:
		return fmt.Errorf("%s (%s) hit a rate limit: %s; try again later (transcript %s)", who, ag.Name(), res.RateLimit.Message, transcript)
	case res.Failed():
		why := strings.TrimRight(res.ErrorText, ": \n")
		switch {
		case res.TimedOut:
			why = "timed out after " + timeout.String()
		case why == "":
			why = fmt.Sprintf("exit status %d", res.ExitCode)
		}
		return fmt.Errorf("%s (%s) failed: %s (transcript %s)", who, ag.Name(), why, transcript)
	}
	return nil
}
