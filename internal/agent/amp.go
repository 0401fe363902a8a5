package agent

import (
	"context"
	"time"
)

// amp drives Sourcegraph's Amp CLI in execute mode:
//
//	amp --dangerously-allow-all -x
//
// with the prompt on stdin and plain-text output (the last paragraph is
// the final message). Amp talks to the Amp service, not to a model API,
// so a base URL here means the Amp server (AMP_URL, key in AMP_API_KEY).
type amp struct {
	cliBase
}

var ampCLI = cliInfo{name: "amp", bin: "amp", pkg: "@sourcegraph/amp"}

func init() {
	register("amp", func(o Options) (Agent, error) {
		return &amp{cliBase: newCLIBase(ampCLI, o)}, nil
	})
}

func (a *amp) Name() string { return "amp" }

func (a *amp) Plan(req Request) (Invocation, error) {
	argv := append(a.argvPrefix(), "--dangerously-allow-all", "-x")
	inv := Invocation{Argv: append(argv, a.args(req)...), PromptStdin: true}
	if a.BaseURL != "" {
		inv.Env = []string{"AMP_URL=" + a.BaseURL, "AMP_API_KEY=" + a.apiKey()}
	}
	return inv, nil
}

func (a *amp) Run(ctx context.Context, req Request) (Result, error) {
	return a.run(ctx, a, req, &ampParser{})
}

// ampParser is TextParser plus recognition of rate/usage-limit messages
// in a failed run's output.
type ampParser struct {
	TextParser
}

func (p *ampParser) Finish(res *Result, stderrTail string) {
	p.TextParser.Finish(res, stderrTail)
	rl := res.RateLimit
	if rl == nil && res.ExitCode != 0 && !res.TimedOut {
		rl = rateLimitFrom(res.FinalText+"\n"+stderrTail, time.Now(), false)
	}
	finishCommon(res, rl, stderrTail)
}
