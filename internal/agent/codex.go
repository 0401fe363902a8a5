package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// codex drives the OpenAI Codex CLI:
//
//	codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check [-m M] -
//
// with the prompt on stdin. With a base URL (Options.BaseURL or
// $RALPH_CODEX_BASE_URL) ralph writes a private CODEX_HOME
// (<dir>/.ralph/agents/codex-home/config.toml) whose only model provider
// is that endpoint (Responses API, key from $RALPH_CODEX_API_KEY), with
// update checks, analytics and the plugin/app sync turned off. Without one
// the user's ~/.codex setup is used untouched.
type codex struct {
	cliBase
}

var codexCLI = cliInfo{name: "codex", bin: "codex", pkg: "@openai/codex"}

func init() {
	register("codex", func(o Options) (Agent, error) {
		return &codex{cliBase: newCLIBase(codexCLI, o)}, nil
	})
}

func (c *codex) Name() string { return "codex" }

// codexHome is the private CODEX_HOME used with a base URL.
func codexHome(dir string) string { return filepath.Join(dir, ".ralph", "agents", "codex-home") }

// codexDefaultModel is sent when a base URL is set and no model is given
// (Codex needs a model name for a custom provider).
const codexDefaultModel = "gpt-5-codex"

func (c *codex) Plan(req Request) (Invocation, error) {
	argv := append(c.argvPrefix(), "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check")
	model := c.model(req)
	if model == "" && c.BaseURL != "" {
		model = codexDefaultModel
	}
	if model != "" {
		argv = append(argv, "-m", model)
	}
	argv = append(argv, c.args(req)...)
	argv = append(argv, "-") // prompt from stdin
	inv := Invocation{Argv: argv, PromptStdin: true}
	if c.BaseURL == "" {
		return inv, nil
	}
	dir := req.Dir
	if dir == "" {
		dir = "."
	}
	home, err := filepath.Abs(codexHome(dir))
	if err != nil {
		return Invocation{}, err
	}
	keyEnv := "RALPH_CODEX_API_KEY"
	inv.Env = []string{"CODEX_HOME=" + home, keyEnv + "=" + c.apiKey()}
	inv.Files = map[string]string{filepath.Join(home, "config.toml"): c.config(model, keyEnv)}
	return inv, nil
}

func (c *codex) config(model, keyEnv string) string {
	base := c.BaseURL
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by ralph: Codex talks only to %s.\n", c.BaseURL)
	fmt.Fprintf(&b, "model = %s\n", strconv.Quote(model))
	b.WriteString("model_provider = \"ralph\"\n")
	b.WriteString("check_for_update_on_startup = false\n\n")
	b.WriteString("[model_providers.ralph]\n")
	b.WriteString("name = \"ralph\"\n")
	fmt.Fprintf(&b, "base_url = %s\n", strconv.Quote(base))
	b.WriteString("wire_api = \"responses\"\n")
	fmt.Fprintf(&b, "env_key = %s\n", strconv.Quote(keyEnv))
	if c.MaxRetries != nil {
		fmt.Fprintf(&b, "request_max_retries = %d\n", *c.MaxRetries)
		fmt.Fprintf(&b, "stream_max_retries = %d\n", *c.MaxRetries)
	}
	b.WriteString("\n[analytics]\nenabled = false\n\n")
	b.WriteString("[features]\nplugins = false\nremote_plugin = false\napps = false\ntool_suggest = false\n")
	return b.String()
}

func (c *codex) Run(ctx context.Context, req Request) (Result, error) {
	return c.run(ctx, c, req, &codexParser{})
}

// codexParser reads `codex exec --json` events.
type codexParser struct {
	sessionID string
	lastText  string
	usage     Usage
	turns     int
	failed    string
	lastErr   string
}

type codexLine struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Item     *struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	} `json:"item"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		CacheWriteTokens  int64 `json:"cache_write_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (p *codexParser) Line(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l codexLine
	if json.Unmarshal(line, &l) != nil {
		return
	}
	switch l.Type {
	case "thread.started":
		p.sessionID = l.ThreadID
	case "item.completed":
		if l.Item != nil && l.Item.Type == "agent_message" && strings.TrimSpace(l.Item.Text) != "" {
			p.lastText = l.Item.Text
		}
	case "turn.completed":
		p.turns++
		if u := l.Usage; u != nil {
			// input_tokens includes the cached part.
			p.usage.Add(Usage{InputTokens: u.InputTokens - u.CachedInputTokens, CacheReadTokens: u.CachedInputTokens,
				CacheWriteTokens: u.CacheWriteTokens, OutputTokens: u.OutputTokens})
		}
	case "turn.failed":
		p.turns++
		if l.Error != nil {
			p.failed = l.Error.Message
		} else {
			p.failed = "turn failed"
		}
	case "error":
		// "Reconnecting... 2/5 (…)" are retries in progress; keep the last
		// real error.
		if !strings.HasPrefix(l.Message, "Reconnecting...") {
			p.lastErr = l.Message
		}
	}
}

func (p *codexParser) Finish(res *Result, stderrTail string) {
	res.SessionID = p.sessionID
	res.FinalText = p.lastText
	res.Usage = p.usage
	res.Turns = p.turns
	var rl *RateLimit
	if msg := firstNonEmpty(p.failed, p.lastErr); msg != "" && (p.failed != "" || res.ExitCode != 0) {
		res.IsError = true
		res.ErrorText = msg
		rl = rateLimitFrom(msg, time.Now(), false)
	}
	finishCommon(res, rl, stderrTail)
}
