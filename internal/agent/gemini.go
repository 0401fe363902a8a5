package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"time"
)

// gemini drives Google's Gemini CLI:
//
//	gemini -p "" --output-format stream-json --yolo --skip-trust [-m M]
//
// with the prompt on stdin (-p "" selects headless mode; stdin is the
// prompt, so its size is not bound by the argv limit). With a base URL
// (Options.BaseURL or $RALPH_GEMINI_BASE_URL) ralph sets GEMINI_API_KEY,
// GOOGLE_GEMINI_BASE_URL and a private GEMINI_CLI_HOME
// (<dir>/.ralph/agents/gemini-home) whose .gemini/settings.json selects
// API-key auth and turns off usage statistics, telemetry and auto-update.
// Without one the user's ~/.gemini setup is used untouched.
type gemini struct {
	cliBase
}

var geminiCLI = cliInfo{name: "gemini", bin: "gemini", pkg: "@google/gemini-cli"}

func init() {
	register("gemini", func(o Options) (Agent, error) {
		return &gemini{cliBase: newCLIBase(geminiCLI, o)}, nil
	})
}

func (g *gemini) Name() string { return "gemini" }

// geminiHome is the private GEMINI_CLI_HOME used with a base URL.
func geminiHome(dir string) string { return filepath.Join(dir, ".ralph", "agents", "gemini-home") }

const geminiDefaultModel = "gemini-2.5-flash"

func (g *gemini) Plan(req Request) (Invocation, error) {
	argv := append(g.argvPrefix(), "-p", "", "--output-format", "stream-json", "--yolo", "--skip-trust")
	model := g.model(req)
	if model == "" && g.BaseURL != "" {
		model = geminiDefaultModel
	}
	if model != "" {
		argv = append(argv, "-m", model)
	}
	inv := Invocation{Argv: append(argv, g.args(req)...), PromptStdin: true}
	if g.BaseURL == "" {
		return inv, nil
	}
	dir := req.Dir
	if dir == "" {
		dir = "."
	}
	home, err := filepath.Abs(geminiHome(dir))
	if err != nil {
		return Invocation{}, err
	}
	general := map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
	if g.MaxRetries != nil {
		general["maxAttempts"] = *g.MaxRetries + 1
	}
	settings := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   general,
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return Invocation{}, err
	}
	inv.Env = []string{
		"GEMINI_CLI_HOME=" + home,
		"GEMINI_API_KEY=" + g.apiKey(),
		"GOOGLE_GEMINI_BASE_URL=" + g.BaseURL,
	}
	inv.Files = map[string]string{filepath.Join(home, ".gemini", "settings.json"): string(b) + "\n"}
	return inv, nil
}

func (g *gemini) Run(ctx context.Context, req Request) (Result, error) {
	return g.run(ctx, g, req, &geminiParser{})
}

// geminiParser reads `gemini --output-format stream-json` events.
type geminiParser struct {
	sessionID   string
	cur         strings.Builder // assistant message being streamed
	inAssistant bool
	lastText    string
	turns       int
	gotResult   bool
	status      string
	errText     string
	usage       Usage
}

type geminiLine struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Delta     bool   `json:"delta"`
	Status    string `json:"status"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		Cached       int64 `json:"cached"`
	} `json:"stats"`
}

func (p *geminiParser) Line(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l geminiLine
	if json.Unmarshal(line, &l) != nil {
		return
	}
	if l.SessionID != "" {
		p.sessionID = l.SessionID
	}
	switch l.Type {
	case "message":
		if l.Role != "assistant" {
			p.inAssistant = false
			return
		}
		if !p.inAssistant {
			p.inAssistant = true
			p.turns++
			p.cur.Reset()
		}
		if !l.Delta {
			p.cur.Reset()
		}
		p.cur.WriteString(l.Content)
		if t := strings.TrimSpace(p.cur.String()); t != "" {
			p.lastText = p.cur.String()
		}
	case "tool_use", "tool_result":
		p.inAssistant = false
	case "error":
		if l.Error != nil {
			p.errText = l.Error.Message
		}
	case "result":
		p.inAssistant = false
		p.gotResult = true
		p.status = l.Status
		if l.Error != nil {
			p.errText = firstNonEmpty(l.Error.Message, l.Error.Type)
		}
		if s := l.Stats; s != nil {
			// input_tokens includes the cached part.
			p.usage = Usage{InputTokens: s.InputTokens - s.Cached, CacheReadTokens: s.Cached, OutputTokens: s.OutputTokens}
		}
	}
}

func (p *geminiParser) Finish(res *Result, stderrTail string) {
	res.SessionID = p.sessionID
	res.FinalText = strings.TrimSpace(p.lastText)
	res.Turns = p.turns
	res.Usage = p.usage
	var rl *RateLimit
	if (p.gotResult && p.status != "success") || (p.errText != "" && res.ExitCode != 0) {
		res.IsError = true
		res.ErrorText = firstNonEmpty(p.errText, "status "+p.status)
		rl = rateLimitFrom(res.ErrorText, time.Now(), false)
	}
	finishCommon(res, rl, stderrTail)
}
