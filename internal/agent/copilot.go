package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// copilot drives GitHub's Copilot CLI (`@github/copilot` on npm) in
// prompt mode:
//
//	copilot --output-format json --allow-all --no-ask-user --no-auto-update [--model M]
//
// with the prompt on stdin (piped stdin is the prompt of a non-interactive
// session, so its size is not bound by the argv limit) and one JSON event
// per line on stdout. Its stream carries no token counts: they come from
// the file --usage-output-file writes when the session ends, in the work
// tree's .ralph/agents/copilot-usage/ (writable in the sandbox, and
// outside git). Without a base URL it uses the user's Copilot login
// (`copilot login`, or COPILOT_GITHUB_TOKEN / GH_TOKEN) and Copilot's own
// model routing. With one (Options.BaseURL or $RALPH_COPILOT_BASE_URL)
// ralph turns on its "bring your own key" mode: COPILOT_PROVIDER_BASE_URL
// (the OpenAI-compatible chat completions API at BASE/v1, or the
// Anthropic Messages API with --provider anthropic), the key, a model
// (COPILOT_MODEL; default gpt-4.1) and COPILOT_OFFLINE=true, which keeps
// it off GitHub entirely: no login, telemetry or update check.
type copilot struct {
	cliBase
	provider string // "" or "openai": chat completions; "anthropic": Messages
}

var copilotCLI = cliInfo{name: "copilot", bin: "copilot", pkg: "@github/copilot"}

func init() {
	register("copilot", func(o Options) (Agent, error) {
		switch o.Provider {
		case "", "openai", "anthropic":
		default:
			return nil, fmt.Errorf("copilot: --provider %q: its custom endpoint speaks openai (chat completions, the default) or anthropic", o.Provider)
		}
		return &copilot{cliBase: newCLIBase(copilotCLI, o), provider: o.Provider}, nil
	})
}

func (c *copilot) Name() string { return "copilot" }

// copilotDefaultModel is the model named to a custom endpoint when none is
// given: a model id Copilot knows, so it picks its token limits and tool
// support; the endpoint may map it to any model.
const copilotDefaultModel = "gpt-4.1"

func (c *copilot) Plan(req Request) (Invocation, error) {
	argv := append(c.argvPrefix(), "--output-format", "json", "--allow-all", "--no-ask-user", "--no-auto-update",
		"--usage-output-file", copilotUsageFile(req))
	model := c.model(req)
	inv := Invocation{PromptStdin: true, Env: []string{"COPILOT_AUTO_UPDATE=false", "NO_COLOR=1"}}
	if c.BaseURL != "" {
		if model == "" {
			model = copilotDefaultModel
		}
		base, typ := c.BaseURL, "openai"
		if c.provider == "anthropic" {
			typ = "anthropic"
		} else if !strings.HasSuffix(base, "/v1") {
			base += "/v1"
		}
		inv.Env = append(inv.Env,
			"COPILOT_PROVIDER_BASE_URL="+base,
			"COPILOT_PROVIDER_TYPE="+typ,
			"COPILOT_PROVIDER_API_KEY="+c.apiKey(),
			"COPILOT_MODEL="+model,
			"COPILOT_OFFLINE=true",
		)
	}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	inv.Argv = append(argv, c.args(req)...)
	return inv, nil
}

func (c *copilot) Run(ctx context.Context, req Request) (Result, error) {
	usage := copilotUsageFile(req)
	_ = os.MkdirAll(filepath.Dir(usage), 0o755)
	_ = os.Remove(usage)
	res, err := c.run(ctx, c, req, &copilotParser{})
	if u, ok := readCopilotUsage(usage); ok && res.Usage == (Usage{}) {
		res.Usage = u
	}
	_ = os.Remove(usage)
	return res, err
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// copilotUsageFile is where a run's --usage-output-file goes: named by
// the request (item, iteration, agent start), so Plan and Run agree.
func copilotUsageFile(req Request) string {
	dir := req.Dir
	if dir == "" {
		dir = "."
	}
	name := fmt.Sprintf("%s-%d-%d.json", unsafeName.ReplaceAllString(firstNonEmpty(req.ItemID, "run"), "_"), req.Iteration, req.Attempt)
	if abs, err := filepath.Abs(filepath.Join(dir, ".ralph", "agents", "copilot-usage", name)); err == nil {
		return abs
	}
	return filepath.Join(dir, ".ralph", "agents", "copilot-usage", name)
}

// readCopilotUsage sums the tokens of every model in a usage file.
func readCopilotUsage(path string) (Usage, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Usage{}, false
	}
	var f struct {
		ModelMetrics map[string]struct {
			Usage struct {
				InputTokens      int64 `json:"inputTokens"`
				OutputTokens     int64 `json:"outputTokens"`
				CacheReadTokens  int64 `json:"cacheReadTokens"`
				CacheWriteTokens int64 `json:"cacheWriteTokens"`
			} `json:"usage"`
		} `json:"modelMetrics"`
	}
	if json.Unmarshal(b, &f) != nil {
		return Usage{}, false
	}
	var u Usage
	for _, m := range f.ModelMetrics {
		u.InputTokens += m.Usage.InputTokens
		u.OutputTokens += m.Usage.OutputTokens
		u.CacheReadTokens += m.Usage.CacheReadTokens
		u.CacheWriteTokens += m.Usage.CacheWriteTokens
	}
	return u, true
}

// copilotParser reads `copilot --output-format json` events: each
// assistant.message is a model turn (its content, when not empty, the
// latest text), assistant.usage carries tokens, session.error a failed
// session (with the provider's HTTP status), result the session id and
// the exit code.
type copilotParser struct {
	sessionID string
	lastText  string
	turns     int
	usage     Usage
	errText   string
	status    int
	gotResult bool
	exitCode  int
}

type copilotLine struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId"`
	ExitCode  *int   `json:"exitCode"`
	Data      struct {
		Content      string  `json:"content"`
		Message      string  `json:"message"`
		StatusCode   int     `json:"statusCode"`
		InputTokens  int64   `json:"inputTokens"`
		OutputTokens int64   `json:"outputTokens"`
		CacheRead    int64   `json:"cacheReadTokens"`
		CacheWrite   int64   `json:"cacheWriteTokens"`
		Cost         float64 `json:"cost"`
	} `json:"data"`
}

func (p *copilotParser) Line(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l copilotLine
	if json.Unmarshal(line, &l) != nil {
		return
	}
	switch l.Type {
	case "assistant.message":
		p.turns++
		if strings.TrimSpace(l.Data.Content) != "" {
			p.lastText = l.Data.Content
		}
	case "assistant.usage":
		p.usage.InputTokens += l.Data.InputTokens
		p.usage.OutputTokens += l.Data.OutputTokens
		p.usage.CacheReadTokens += l.Data.CacheRead
		p.usage.CacheWriteTokens += l.Data.CacheWrite
		p.usage.CostUSD += l.Data.Cost
	case "session.error":
		p.errText = firstNonEmpty(l.Data.Message, "the Copilot session failed")
		p.status = l.Data.StatusCode
	case "result":
		p.gotResult = true
		p.sessionID = firstNonEmpty(l.SessionID, p.sessionID)
		if l.ExitCode != nil {
			p.exitCode = *l.ExitCode
		}
	}
}

func (p *copilotParser) Finish(res *Result, stderrTail string) {
	res.SessionID = p.sessionID
	res.FinalText = p.lastText
	res.Turns = p.turns
	res.Usage = p.usage
	var rl *RateLimit
	if p.errText != "" || (p.gotResult && p.exitCode != 0) {
		res.IsError = true
		res.ErrorText = firstNonEmpty(p.errText, fmt.Sprintf("copilot exited %d", p.exitCode))
		rl = rateLimitFrom(res.ErrorText, time.Now(), p.status == 429)
	}
	finishCommon(res, rl, stderrTail)
}
