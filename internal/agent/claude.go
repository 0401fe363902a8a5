package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// claude drives Claude Code in print mode:
//
//	claude -p --output-format stream-json --verbose --dangerously-skip-permissions [--model M]
//
// with the prompt on stdin. With a base URL (Options.BaseURL or
// $RALPH_CLAUDE_BASE_URL) it talks only to that endpoint:
// ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and the switches that turn off
// telemetry, error reporting, auto-update and other non-essential traffic.
// Without one it uses the user's own Claude Code login and settings.
type claude struct {
	cliBase
}

func init() {
	register("claude", func(o Options) (Agent, error) {
		return &claude{cliBase: newCLIBase(claudeCLI, o)}, nil
	})
}

var claudeCLI = cliInfo{name: "claude", bin: "claude", pkg: "@anthropic-ai/claude-code"}

func (c *claude) Name() string { return "claude" }

func (c *claude) Plan(req Request) (Invocation, error) {
	argv := append(c.argvPrefix(), "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions")
	if m := c.model(req); m != "" {
		argv = append(argv, "--model", m)
	}
	argv = append(argv, c.args(req)...)
	var env []string
	if os.Geteuid() == 0 {
		// Claude Code refuses --dangerously-skip-permissions as root
		// unless it is told it runs in a sandbox.
		env = append(env, "IS_SANDBOX=1")
	}
	if c.BaseURL != "" {
		env = append(env,
			"ANTHROPIC_BASE_URL="+c.BaseURL,
			"ANTHROPIC_API_KEY="+c.apiKey(),
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_ERROR_REPORTING=1",
			"DISABLE_BUG_COMMAND=1",
		)
	}
	if c.MaxRetries != nil {
		env = append(env, "CLAUDE_CODE_MAX_RETRIES="+strconv.Itoa(*c.MaxRetries))
	}
	return Invocation{Argv: argv, Env: env, PromptStdin: true}, nil
}

func (c *claude) Run(ctx context.Context, req Request) (Result, error) {
	return c.run(ctx, c, req, &claudeParser{})
}

// claudeParser reads Claude Code's stream-json (also what `amp
// --stream-json` prints).
type claudeParser struct {
	sessionID   string
	lastText    string // text of the last assistant message that had text
	gotResult   bool
	result      claudeResult
	rateLimit   *RateLimit
	apiErr      string
	turns       int
	seenMsg     map[string]bool
	streamUsage Usage // summed from assistant messages, used when no result line
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (u claudeUsage) usage() Usage {
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

type claudeResult struct {
	Subtype           string            `json:"subtype"`
	IsError           bool              `json:"is_error"`
	Result            string            `json:"result"`
	NumTurns          int               `json:"num_turns"`
	TotalCostUSD      float64           `json:"total_cost_usd"`
	Usage             claudeUsage       `json:"usage"`
	PermissionDenials []json.RawMessage `json:"permission_denials"`
	APIErrorStatus    int               `json:"api_error_status"`
	Errors            []string          `json:"errors"`
}

type claudeLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Error     string `json:"error"`
	APIStatus int    `json:"api_error_status"`
	Message   *struct {
		ID      string      `json:"id"`
		Role    string      `json:"role"`
		Usage   claudeUsage `json:"usage"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
	RateLimitInfo *struct {
		Status        string  `json:"status"`
		ResetsAt      float64 `json:"resetsAt"`
		RateLimitType string  `json:"rateLimitType"`
	} `json:"rate_limit_info"`
}

func (p *claudeParser) Line(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var l claudeLine
	if json.Unmarshal(line, &l) != nil {
		return
	}
	if l.SessionID != "" {
		p.sessionID = l.SessionID
	}
	switch l.Type {
	case "assistant":
		if l.Message == nil {
			return
		}
		var parts []string
		for _, c := range l.Message.Content {
			if c.Type == "text" && strings.TrimSpace(c.Text) != "" {
				parts = append(parts, c.Text)
			}
		}
		if len(parts) > 0 {
			p.lastText = strings.Join(parts, "\n")
		}
		if l.Error != "" || l.APIStatus != 0 {
			p.apiErr = p.lastText
			if l.Error == "rate_limit" || l.APIStatus == 429 {
				p.rateLimit = rateLimitFrom(p.lastText, time.Now(), true)
			}
		}
		if id := l.Message.ID; id != "" {
			if p.seenMsg == nil {
				p.seenMsg = map[string]bool{}
			}
			if !p.seenMsg[id] {
				p.seenMsg[id] = true
				p.turns++
				p.streamUsage.Add(l.Message.Usage.usage())
			}
		}
	case "rate_limit_event":
		if i := l.RateLimitInfo; i != nil && i.Status == "rejected" {
			rl := &RateLimit{Message: "rate limit reached"}
			if i.RateLimitType != "" {
				rl.Message = i.RateLimitType + " limit reached"
			}
			if i.ResetsAt > 0 {
				rl.ResetAt = time.Unix(int64(i.ResetsAt), 0)
			}
			p.rateLimit = rl
		}
	case "result":
		var r claudeResult
		if json.Unmarshal(line, &r) == nil {
			p.gotResult = true
			p.result = r
		}
	}
}

func (p *claudeParser) Finish(res *Result, stderrTail string) {
	res.SessionID = p.sessionID
	res.FinalText = p.lastText
	res.Turns = p.turns
	res.Usage = p.streamUsage
	if p.gotResult {
		r := p.result
		if r.Result != "" {
			res.FinalText = r.Result
		}
		if r.NumTurns > 0 {
			res.Turns = r.NumTurns
		}
		res.Usage = r.Usage.usage()
		res.Usage.CostUSD = r.TotalCostUSD
		res.PermissionDenials = len(r.PermissionDenials)
		if r.IsError || (r.Subtype != "" && r.Subtype != "success") {
			res.IsError = true
			res.ErrorText = firstNonEmpty(r.Result, strings.Join(r.Errors, "; "), r.Subtype)
			if r.APIErrorStatus == 429 && p.rateLimit == nil {
				p.rateLimit = rateLimitFrom(res.ErrorText, time.Now(), true)
			}
		}
	} else if p.apiErr != "" {
		res.IsError = true
		res.ErrorText = p.apiErr
	}
	if p.rateLimit == nil && res.IsError {
		p.rateLimit = rateLimitFrom(res.ErrorText, time.Now(), false)
	}
	finishCommon(res, p.rateLimit, stderrTail)
}

// ---------------------------------------------------------------------------
// Shared by the CLI adapters (claude, codex, opencode, gemini, amp, copilot).

// cliInfo names one agent CLI and the npm package that installs it.
type cliInfo struct {
	name string // adapter name, also RALPH_<NAME>_BASE_URL
	bin  string // executable name
	pkg  string // npm package
}

// cliBase holds what every CLI adapter is configured with.
type cliBase struct {
	info    cliInfo
	Command []string // argv prefix override (Options.Command)
	Model   string
	Args    []string
	// BaseURL, when set, points the CLI at this endpoint only (with a
	// key from APIKeyEnv, $RALPH_<NAME>_API_KEY, or a dummy key that
	// local endpoints such as Ollama or vLLM accept).
	BaseURL   string
	APIKeyEnv string
	// MaxRetries, when set, caps the CLI's own retries of failed model
	// requests (tests use 0 so a 429 surfaces at once).
	MaxRetries *int
	Runner     proc.Runner
}

func newCLIBase(info cliInfo, o Options) cliBase {
	up := strings.ToUpper(info.name)
	base := o.BaseURL
	if base == "" {
		base = os.Getenv("RALPH_" + up + "_BASE_URL")
	}
	return cliBase{
		info:       info,
		Command:    append([]string{}, o.Command...),
		Model:      o.Model,
		Args:       append([]string{}, o.Args...),
		BaseURL:    strings.TrimRight(base, "/"),
		APIKeyEnv:  o.APIKeyEnv,
		MaxRetries: maxRetriesFromEnv(up),
		Runner:     proc.Exec{},
	}
}

// maxRetriesFromEnv reads $RALPH_<NAME>_MAX_RETRIES, else
// $RALPH_AGENT_MAX_RETRIES: a cap on the CLI's own retries of failed
// model requests (claude: CLAUDE_CODE_MAX_RETRIES; codex:
// request_max_retries and stream_max_retries in the private config;
// gemini: general.maxAttempts = N+1). With 0 a 429 reaches ralph at once,
// which then waits and retries without spending an attempt. Unset or not
// a non-negative integer: the CLI's default.
func maxRetriesFromEnv(up string) *int {
	for _, k := range []string{"RALPH_" + up + "_MAX_RETRIES", "RALPH_AGENT_MAX_RETRIES"} {
		v := strings.TrimSpace(os.Getenv(k))
		if v == "" {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return &n
		}
	}
	return nil
}

func (b *cliBase) model(req Request) string {
	if req.Model != "" {
		return req.Model
	}
	return b.Model
}

func (b *cliBase) args(req Request) []string {
	return append(append([]string{}, b.Args...), req.Args...)
}

// apiKey is the key sent to BaseURL.
func (b *cliBase) apiKey() string {
	if b.APIKeyEnv != "" {
		if v := os.Getenv(b.APIKeyEnv); v != "" {
			return v
		}
	}
	if v := os.Getenv("RALPH_" + strings.ToUpper(b.info.name) + "_API_KEY"); v != "" {
		return v
	}
	// The CLIs refuse to start without some key; endpoints that need none
	// (Ollama, vLLM, the test server) ignore it.
	return noKey
}

// noKey is sent when a custom endpoint was given without a key.
const noKey = "ralph-no-key"

// argvPrefix is Options.Command, else the binary found by FindAgentBinary,
// else the bare name (Run then fails with an install hint).
func (b *cliBase) argvPrefix() []string {
	if len(b.Command) > 0 {
		return append([]string{}, b.Command...)
	}
	if p, err := FindAgentBinary(b.info.bin); err == nil {
		return []string{p}
	}
	return []string{b.info.bin}
}

func (b *cliBase) run(ctx context.Context, a Agent, req Request, p StreamParser) (Result, error) {
	inv, err := a.Plan(req)
	if err != nil {
		return Result{}, err
	}
	r := b.Runner
	if r == nil {
		r = proc.Exec{}
	}
	res, err := runCLI(ctx, r, inv, req, p)
	if errors.Is(err, proc.ErrNotFound) {
		return res, b.notFound(inv.Argv[0])
	}
	return res, err
}

// errAgentNotInstalled is wrapped by the error Run returns when the CLI
// is not installed.
var errAgentNotInstalled = errors.New("agent CLI not installed")

func (b *cliBase) notFound(argv0 string) error {
	return fmt.Errorf("%w: %s: %q not found in %s or $PATH; install it: npm install -g %s",
		errAgentNotInstalled, b.info.name, argv0, AgentsBinDir(), b.info.pkg)
}

// agentsDir is where scripts/install-agents.sh installs the agent CLIs:
// $RALPH_AGENTS_DIR, default $XDG_CACHE_HOME/ralph/agents (the cache
// folder defaults to ~/.cache).
func agentsDir() string {
	if d := os.Getenv("RALPH_AGENTS_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "ralph-agents")
	}
	return filepath.Join(cache, "ralph", "agents")
}

// AgentsBinDir is AgentsDir()/node_modules/.bin.
func AgentsBinDir() string { return filepath.Join(agentsDir(), "node_modules", ".bin") }

// FindAgentBinary looks for an agent CLI in AgentsBinDir() first, then
// on $PATH, and returns its path.
func FindAgentBinary(name string) (string, error) {
	p := filepath.Join(AgentsBinDir(), name)
	if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
		return p, nil
	}
	return exec.LookPath(name)
}

// finishCommon applies what every CLI parser does last: the rate limit,
// and an error text for a failed exit that the output did not explain.
func finishCommon(res *Result, rl *RateLimit, stderrTail string) {
	if rl == nil && res.ExitCode != 0 && !res.TimedOut {
		rl = rateLimitFrom(stderrTail, time.Now(), false)
	}
	res.RateLimit = rl
	if res.ExitCode != 0 && !res.TimedOut && res.ErrorText == "" {
		msg := lastLines(stderrTail, 5)
		if msg == "" {
			msg = "no output"
		}
		res.ErrorText = fmt.Sprintf("exit %d: %s", res.ExitCode, msg)
	}
	if res.ExitCode != 0 && !res.TimedOut {
		res.IsError = true
	}
}

var (
	// "429" is matched as a number of its own (status429Re), not as a
	// substring: a port such as 127.0.0.1:42953 or an id is no rate limit.
	rateLimitWords = []string{"rate limit", "rate_limit", "ratelimit", "usage limit", "too many requests",
		"quota", "resource has been exhausted", "resource_exhausted", "limit reached", "hit your limit"}
	retryInRe   = regexp.MustCompile(`(?i)(?:try again in|retry after|retry in|retrying in|resets? in)\s+((?:\d+(?:\.\d+)?\s*(?:milliseconds?|ms|minutes?|mins?|m|seconds?|secs?|s|hours?|hrs?|h|days?|d)\b[\s,]*(?:and\s+)?)+)`)
	durPartRe   = regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)\s*(milliseconds?|ms|minutes?|mins?|m|seconds?|secs?|s|hours?|hrs?|h|days?|d)\b`)
	epochBarRe  = regexp.MustCompile(`limit reached\|(\d{10})`)
	status429Re = regexp.MustCompile(`(?:^|[^\w.:])429(?:$|[^\w.]|\.(?:$|\s))`)
)

// rateLimitFrom recognises a rate- or usage-limit message and reads a reset
// time from it when it says one ("try again in 20s", "retry after 1s",
// "… limit reached|1712345678"). force makes any message a rate limit
// (the output already said so, e.g. HTTP 429).
func rateLimitFrom(msg string, now time.Time, force bool) *RateLimit {
	low := strings.ToLower(msg)
	if !force {
		hit := status429Re.MatchString(low)
		for _, w := range rateLimitWords {
			if strings.Contains(low, w) {
				hit = true
				break
			}
		}
		if !hit {
			return nil
		}
	}
	rl := &RateLimit{Message: strings.TrimSpace(msg)}
	if len(rl.Message) > 500 {
		rl.Message = rl.Message[:500]
	}
	if rl.Message == "" {
		rl.Message = "rate limited"
	}
	if m := epochBarRe.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			rl.ResetAt = time.Unix(n, 0)
			return rl
		}
	}
	if m := retryInRe.FindStringSubmatch(msg); m != nil {
		var d time.Duration
		for _, part := range durPartRe.FindAllStringSubmatch(m[1], -1) {
			f, _ := strconv.ParseFloat(part[1], 64)
			unit := strings.ToLower(part[2])
			switch {
			case unit == "ms" || strings.HasPrefix(unit, "milli"):
				d += time.Duration(f * float64(time.Millisecond))
			case strings.HasPrefix(unit, "s"):
				d += time.Duration(f * float64(time.Second))
			case strings.HasPrefix(unit, "m"):
				d += time.Duration(f * float64(time.Minute))
			case strings.HasPrefix(unit, "h"):
				d += time.Duration(f * float64(time.Hour))
			case strings.HasPrefix(unit, "d"):
				d += time.Duration(f * 24 * float64(time.Hour))
			}
		}
		if d > 0 {
			rl.ResetAt = now.Add(d)
		}
	}
	return rl
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}
