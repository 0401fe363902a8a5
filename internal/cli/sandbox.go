package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
)

// confine is a of this run, in the run's sandbox. The coordinator's
// remote agent is not confined here: its workers confine the real one.
func (o *RunOptions) confine(a agent.Agent, paths engine.Paths) agent.Agent {
	if _, remote := a.(*cluster.RemoteAgent); remote {
		return a
	}
	return app.Confine(a, o.sandbox, paths, o.BaseURL, o.Env)
}

// confinedChooser confines every agent choose picks (roles, resolvers,
// council members).
func (o *RunOptions) confinedChooser(choose func(*engine.Item, string) (engine.AgentChoice, error), paths engine.Paths) func(*engine.Item, string) (engine.AgentChoice, error) {
	return func(it *engine.Item, role string) (engine.AgentChoice, error) {
		c, err := choose(it, role)
		if err == nil {
			c.Agent = o.confine(c.Agent, paths)
		}
		return c, err
	}
}

// sandboxCheck is doctor's word on the sandbox: that it starts here, and
// what it allows the run's agent and gates.
func (o *RunOptions) sandboxCheck(root string) preflightCheck {
	c := preflightCheck{Name: "sandbox"}
	sb, err := app.OpenSandbox(o.sandboxCfg, o.NoSandbox, engine.PathsFor(root))
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

// oneOffAgent is the agent the flags name for a command that runs one
// agent outside a loop (prd import, plan): the config's settings fill the
// flags not given, and it runs in the repository's sandbox.
func (a *AgentFlags) oneOffAgent(f *Factory, dir string, noSandbox bool, set func(string) bool) (agent.Agent, error) {
	l, err := f.Settings(dir)
	if err != nil {
		return nil, err
	}
	a.applyConfig(l.Config, set)
	ag, err := a.build()
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
