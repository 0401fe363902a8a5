package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// opencode drives sst/opencode:
//
//	opencode run --format json --auto [-m PROVIDER/MODEL]
//
// with the prompt on stdin. With a base URL (Options.BaseURL or
// $RALPH_OPENCODE_BASE_URL) ralph passes a whole config in
// $OPENCODE_CONFIG_CONTENT (nothing is written to the user's repo or
// ~/.config) that defines one provider "ralph" using
// @ai-sdk/openai-compatible at that base URL (chat completions), and turns
// off auto-update, sharing, the models.dev fetch and LSP downloads.
// Without one the user's opencode setup is used untouched.
type opencode struct {
	cliBase
}

var opencodeCLI = cliInfo{name: "opencode", bin: "opencode", pkg: "opencode-ai"}

func init() {
	register("opencode", func(o Options) (Agent, error) {
		return &opencode{cliBase: newCLIBase(opencodeCLI, o)}, nil
	})
}

func (c *opencode) Name() string { return "opencode" }

const opencodeDefaultModel = "ralph-model"

func (c *opencode) Plan(req Request) (Invocation, error) {
	argv := append(c.argvPrefix(), "run", "--format", "json", "--auto")
	model := c.model(req)
	inv := Invocation{PromptStdin: true}
	if c.BaseURL != "" {
		if model == "" {
			model = opencodeDefaultModel
		}
		model = strings.TrimPrefix(model, "ralph/")
		base := c.BaseURL
		if !strings.HasSuffix(base, "/v1") {
			base += "/v1"
		}
		cfg := map[string]any{
			"$schema":    "https://opencode.ai/config.json",
			"autoupdate": false,
			"share":      "disabled",
			"model":      "ralph/" + model,
			"provider": map[string]any{
				"ralph": map[string]any{
					"npm":  "@ai-sdk/openai-compatible",
					"name": "ralph",
					"options": map[string]any{
						"baseURL": base,
						"apiKey":  "{env:RALPH_OPENCODE_API_KEY}",
					},
					"models": map[string]any{model: map[string]any{"name": model}},
				},
			},
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return Invocation{}, err
		}
		inv.Env = []string{
			"OPENCODE_CONFIG_CONTENT=" + string(b),
			"RALPH_OPENCODE_API_KEY=" + c.apiKey(),
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_SHARE=1",
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		}
		model = "ralph/" + model
	}
	if model != "" {
		argv = append(argv, "-m", model)
	}
	inv.Argv = append(argv, c.args(req)...)
	if req.Dir != "" {
		// opencode takes its project directory (where its bash tool runs
		// and relative paths resolve) from $PWD, not from the process's
		// working directory: without this it works in whatever folder
		// ralph was started from, not in the story's tree or worktree.
		dir, err := filepath.Abs(req.Dir)
		if err != nil {
			return Invocation{}, err
		}
		inv.Env = append(inv.Env, "PWD="+dir)
	}
	return inv, nil
}

func (c *opencode) Run(ctx context.Context, req Request) (Result, error) {
	return c.run(ctx, c, req, &opencodeParser{})
}

// opencodeParser reads `opencode run --format json` events.
type opencodeParser struct {
	sessionID string
	lastMsgID string
	lastText  string
	usage     Usage
	turns     int
	denials   int
	errText   string
	rateLimit *RateLimit
}

type opencodeLine struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      *struct {
		Type      string  `json:"type"`
		MessageID string  `json:"messageID"`
		Text      string  `json:"text"`
		Cost      float64 `json:"cost"`
		Tokens    *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
			Cache  struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		State *struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"state"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message         string            `json:"message"`
			StatusCode      int               `json:"statusCode"`
			ResponseHeaders map[string]string `json:"responseHeaders"`
		} `json:"data"`
	} `json:"error"`
}

func (p *opencodeParser) Line(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l opencodeLine
	if json.Unmarshal(line, &l) != nil {
		return
	}
	if l.SessionID != "" {
		p.sessionID = l.SessionID
	}
	switch l.Type {
	case "text":
		if l.Part == nil || strings.TrimSpace(l.Part.Text) == "" {
			return
		}
		if l.Part.MessageID != "" && l.Part.MessageID == p.lastMsgID {
			p.lastText += "\n" + l.Part.Text
		} else {
			p.lastText = l.Part.Text
		}
		p.lastMsgID = l.Part.MessageID
	case "step_finish":
		p.turns++
		if l.Part != nil {
			if t := l.Part.Tokens; t != nil {
				p.usage.Add(Usage{InputTokens: t.Input, OutputTokens: t.Output, CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write})
			}
			p.usage.CostUSD += l.Part.Cost
		}
	case "tool_use":
		if l.Part != nil && l.Part.State != nil && l.Part.State.Status == "error" &&
			strings.Contains(strings.ToLower(l.Part.State.Error), "permission") {
			p.denials++
		}
	case "error":
		if l.Error == nil {
			p.errText = "error"
			return
		}
		d := l.Error.Data
		p.errText = firstNonEmpty(d.Message, l.Error.Name)
		if d.StatusCode != 0 {
			p.errText = "HTTP " + strconv.Itoa(d.StatusCode) + ": " + p.errText
		}
		now := time.Now()
		p.rateLimit = rateLimitFrom(p.errText, now, d.StatusCode == 429)
		if p.rateLimit != nil && p.rateLimit.ResetAt.IsZero() {
			if s, err := strconv.Atoi(d.ResponseHeaders["retry-after"]); err == nil && s > 0 {
				p.rateLimit.ResetAt = now.Add(time.Duration(s) * time.Second)
			}
		}
	}
}

func (p *opencodeParser) Finish(res *Result, stderrTail string) {
	res.SessionID = p.sessionID
	res.FinalText = p.lastText
	res.Usage = p.usage
	res.Turns = p.turns
	res.PermissionDenials = p.denials
	if p.errText != "" {
		res.IsError = true
		res.ErrorText = p.errText
	}
	finishCommon(res, p.rateLimit, stderrTail)
}
