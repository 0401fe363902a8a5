// Package config reads .ralph/config.yaml and the user's own config
// ($XDG_CONFIG_HOME/ralph/config.yaml): the same settings as the `ralph
// run` flags. Flags win, then the repository's file, then the user's,
// then the built-in defaults. Unknown keys are errors naming their line,
// so a typo never silently does nothing.
package config

import (
	"errors"
	"fmt"
	"github.com/ralph-loop/ralph/internal/prd"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/token"
)

// Config mirrors the run flags.
type Config struct {
	Agent            string   `yaml:"agent"`
	AgentCmd         string   `yaml:"agent_cmd"`
	AgentArgs        []string `yaml:"agent_args"`
	Model            string   `yaml:"model"`
	BaseURL          string   `yaml:"base_url"`
	Provider         string   `yaml:"provider"`
	APIKeyEnv        string   `yaml:"api_key_env"`
	Script           string   `yaml:"script"`
	PRD              string   `yaml:"prd"`
	Tasks            string   `yaml:"tasks"`
	Pipeline         string   `yaml:"pipeline"`
	Prompt           string   `yaml:"prompt"`
	Promise          string   `yaml:"promise"`
	MaxIterations    int      `yaml:"max_iterations"`
	MaxAttempts      int      `yaml:"max_attempts"`
	IterationTimeout Duration `yaml:"iteration_timeout"`
	GateTimeout      Duration `yaml:"gate_timeout"`
	Parallel         int      `yaml:"parallel"`
	Breaker          *int     `yaml:"breaker"`
	// BreakerCooldown: after it, an open breaker is half-open at the next
	// run (one iteration runs; a success closes it).
	BreakerCooldown Duration `yaml:"breaker_cooldown"`
	// Preset names a set of bounds (nova: Nova26's loop).
	Preset    string  `yaml:"preset"`
	MaxCost   float64 `yaml:"max_cost"`
	MaxTokens int64   `yaml:"max_tokens"`
	// TranscriptMaxBytes caps each transcript (0: the default, 50 MB).
	TranscriptMaxBytes int64    `yaml:"transcript_max_bytes"`
	RateLimitBackoff   Duration `yaml:"rate_limit_backoff"`
	// AskTimeout: an agent's question (ralph ask) nobody answered this
	// long stops waiting (default 0: it waits as long as the run runs).
	AskTimeout Duration `yaml:"ask_timeout"`
	// ErrorWait is the plain loop's wait after an agent's non-zero exit
	// (default 10s; 0 = none).
	ErrorWait *Duration `yaml:"error_wait"`
	// MaxCallsPerHour holds agent starts back beyond this many an hour.
	MaxCallsPerHour int `yaml:"max_calls_per_hour"`
	// JudgeOnCoordinator: `ralph coordinator` runs every story's gates
	// itself, whatever its workers report.
	JudgeOnCoordinator bool              `yaml:"judge_on_coordinator"`
	Env                map[string]string `yaml:"env"`
	Gates              map[string]string `yaml:"gates"`    // task loop: gate name → command
	Watch              bool              `yaml:"watch"`    // task loop: wait for new tasks
	Interval           Duration          `yaml:"interval"` // task loop: watch interval
	MaxItemIterations  int               `yaml:"max_item_iterations"`
	TestFix            int               `yaml:"test_fix"`      // re-runs after a failed test gate, per attempt
	TestFixRole        string            `yaml:"test_fix_role"` // their role (default debugger)
	PlanApproval       bool              `yaml:"plan_approval"`
	AutoApprove        bool              `yaml:"auto_approve"`
	TrustMarks         bool              `yaml:"trust_marks"` // count items marked done by hand as passed
	Council            int               `yaml:"council"`     // voters on a critical item (default 3)
	// Progress memory: the digest's budget and who folds older entries
	// into the codebase patterns (default the run's agent).
	ProgressBudgetTokens int `yaml:"progress_budget_tokens"`
	// Progress is where the progress memory lives: "ralph" (default,
	// .ralph/progress.md only), "repo" (also progress.txt in the
	// repository, kept by the agents and committed with each item) or
	// "agents-md" (the codebase patterns in AGENTS.md or CLAUDE.md,
	// between markers, kept by the agents and committed with each item).
	Progress string `yaml:"progress"`
	// GuidanceIterations is how many iterations are shown a piece of
	// `ralph guide` guidance that none acknowledges (default 3).
	GuidanceIterations int `yaml:"guidance_iterations"`
	// Notifications (run end, item blocked, rate-limit pause, a plan
	// awaiting approval): webhooks that get a JSON POST, a command that
	// gets the event on stdin, Slack, Telegram, email.
	Notify          Notify `yaml:"notify"`
	NotifyCommand   string `yaml:"notify_command"`
	Summarizer      string `yaml:"summarizer"`
	SummarizerCmd   string `yaml:"summarizer_cmd"`
	SummarizerModel string `yaml:"summarizer_model"`
	// Protected are globs of more files the agent may not change, for
	// every item (golden files, fixtures): besides the tests and test
	// configuration each item's contract protects.
	Protected []string `yaml:"protected"`
	// ProtectedRule is how a protected Go test file is kept: "files"
	// (default: not changed at all) or "declarations" (every declaration
	// it had stays byte for byte; new ones may be added).
	ProtectedRule string `yaml:"protected_rule"`
	// Sandbox: what the agents and gates may write, see and reach (the
	// user's config and the repository's add up, Sandbox.Merge).
	Sandbox Sandbox `yaml:"sandbox"`
}

// Notify is the `notify:` section: a list of webhook URLs (the short
// form), or a map of where to send the notifications. Secrets — a bot
// token, an SMTP password, a Slack webhook's URL — come from environment
// variables it names, never from the file.
type Notify struct {
	Webhooks []string `yaml:"webhooks"`
	Command  string   `yaml:"command"`
	// Timeout bounds one notification (default 10s): a slow endpoint
	// never holds the run.
	Timeout  Duration  `yaml:"timeout"`
	Slack    *Slack    `yaml:"slack"`
	Telegram *Telegram `yaml:"telegram"`
	Email    *Email    `yaml:"email"`
}

// Slack posts to an incoming webhook, or with a bot's token to a channel
// (chat.postMessage), where a reply in the thread of an agent's question
// answers it.
type Slack struct {
	WebhookURLEnv string `yaml:"webhook_url_env"` // the variable that holds the webhook's URL
	WebhookURL    string `yaml:"webhook_url"`     // or the URL itself
	BotTokenEnv   string `yaml:"bot_token_env"`   // the variable that holds a bot token (xoxb-…)
	Channel       string `yaml:"channel"`         // with a bot token: the channel's id
	APIURL        string `yaml:"api_url"`         // default https://slack.com/api
}

// Telegram sends through a bot (the Bot API's sendMessage); a reply in
// the chat to an agent's question answers it (getUpdates).
type Telegram struct {
	TokenEnv string `yaml:"token_env"` // the variable that holds the bot's token
	ChatID   string `yaml:"chat_id"`
	APIURL   string `yaml:"api_url"` // default https://api.telegram.org
}

// Email sends a mail over SMTP (STARTTLS when the server offers it).
type Email struct {
	SMTP        string   `yaml:"smtp"` // host:port
	From        string   `yaml:"from"`
	To          []string `yaml:"to"`
	Username    string   `yaml:"username"`
	PasswordEnv string   `yaml:"password_env"` // the variable that holds the password
}

// UnmarshalYAML reads either form of the section.
func (n *Notify) UnmarshalYAML(b []byte) error {
	var urls []string
	if err := yaml.Unmarshal(b, &urls); err == nil {
		*n = Notify{Webhooks: urls}
		return nil
	}
	type plain Notify
	var p plain
	if err := yaml.UnmarshalWithOptions(b, &p, yaml.Strict()); err != nil {
		return fmt.Errorf("notify: %s", yaml.FormatError(err, false, false))
	}
	*n = Notify(p)
	return nil
}

// Sandbox is the `sandbox:` section.
type Sandbox struct {
	// Enabled false runs without the sandbox, like --no-sandbox.
	Enabled *bool `yaml:"enabled"`
	// Network is the agents' network: proxy (the default: their model's
	// API and AllowHosts only) or host (unfiltered).
	Network string `yaml:"network"`
	// AllowHosts are hosts (host or host:port) every agent may reach.
	AllowHosts []string `yaml:"allow_hosts"`
	// Writable are more writable paths (~ allowed).
	Writable []string `yaml:"writable"`
	// Caches replace the default package caches (writable) when set.
	Caches []string `yaml:"caches"`
	// Hidden are more paths no agent or gate sees.
	Hidden []string `yaml:"hidden"`
	// GateNetwork is a gate's network by name (none, proxy or host;
	// "*" for every gate); none by default.
	GateNetwork map[string]string `yaml:"gate_network"`
	// GateHosts are hosts a gate may reach, by the gate's name ("*" for
	// every gate): a registry for `npm audit`.
	GateHosts map[string][]string `yaml:"gate_hosts"`
	// Env are more variables of ralph's environment passed into the
	// sandbox (NAME, or NAME_* for a family), besides its allowlist.
	Env []string `yaml:"env"`
}

// Widening names the settings of s that widen the sandbox (more to
// write, reach or see): only the user's own config may hold them.
func (s Sandbox) Widening() []string {
	var out []string
	if s.Enabled != nil && !*s.Enabled {
		out = append(out, "enabled: false")
	}
	if s.Network != "" && s.Network != "proxy" {
		out = append(out, "network: "+s.Network)
	}
	if len(s.AllowHosts) > 0 {
		out = append(out, "allow_hosts")
	}
	if len(s.Writable) > 0 {
		out = append(out, "writable")
	}
	for name, n := range s.GateNetwork {
		if n != "none" {
			out = append(out, "gate_network "+name+": "+n)
		}
	}
	if len(s.GateHosts) > 0 {
		out = append(out, "gate_hosts")
	}
	if len(s.Env) > 0 {
		out = append(out, "env")
	}
	sort.Strings(out)
	return out
}

// Merge lays over onto s: lists add up, over's settings win.
func (s Sandbox) Merge(over Sandbox) Sandbox {
	out := s
	if over.Enabled != nil {
		out.Enabled = over.Enabled
	}
	if over.Network != "" {
		out.Network = over.Network
	}
	out.AllowHosts = append(append([]string{}, s.AllowHosts...), over.AllowHosts...)
	out.Writable = append(append([]string{}, s.Writable...), over.Writable...)
	out.Hidden = append(append([]string{}, s.Hidden...), over.Hidden...)
	if over.Caches != nil {
		out.Caches = append(append([]string{}, s.Caches...), over.Caches...)
	}
	if len(s.GateNetwork)+len(over.GateNetwork) > 0 {
		out.GateNetwork = map[string]string{}
		for k, v := range s.GateNetwork {
			out.GateNetwork[k] = v
		}
		for k, v := range over.GateNetwork {
			out.GateNetwork[k] = v
		}
	}
	if len(s.GateHosts)+len(over.GateHosts) > 0 {
		out.GateHosts = map[string][]string{}
		for _, m := range []map[string][]string{s.GateHosts, over.GateHosts} {
			for k, v := range m {
				out.GateHosts[k] = append(out.GateHosts[k], v...)
			}
		}
	}
	out.Env = append(append([]string{}, s.Env...), over.Env...)
	return out
}

// UserPath is the user's own config, $XDG_CONFIG_HOME/ralph/config.yaml
// (~/.config/ralph/config.yaml): defaults for every setting of a
// repository's .ralph/config.yaml.
func UserPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "ralph", "config.yaml")
}

// Origin is where a setting's value was read: a file and the line of its
// key. The zero Origin is ralph's built-in default.
type Origin struct {
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

func (o Origin) String() string {
	if o.File == "" {
		return "default"
	}
	return fmt.Sprintf("%s:%d", o.File, o.Line)
}

// Layered is the settings of a repository: its .ralph/config.yaml laid
// over the user's config (a key in the repository's file wins; the
// sandbox's lists add up, see Sandbox.Merge), and where each key came from.
type Layered struct {
	*Config
	// From holds each top-level key set in a file: the repository's
	// origin, else the user's. Sandbox lists both when both set it.
	From map[string][]Origin
	// ProjectSandbox is the repository file's own `sandbox:` section (nil
	// when it has none), read at ProjectSandboxAt: a repository may
	// narrow the sandbox, only the user widens it (Sandbox.Widening).
	ProjectSandbox   *Sandbox
	ProjectSandboxAt Origin
}

// LoadLayered reads the user's config (UserPath) and then repoPath, each
// strictly (an error names the file and line); a missing file is empty.
func LoadLayered(repoPath string) (*Layered, error) {
	out := &Layered{Config: &Config{}, From: map[string][]Origin{}}
	for _, path := range []string{UserPath(), repoPath} {
		if path == "" {
			continue
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c, err := parse(path, b)
		if err != nil {
			return nil, err
		}
		out.lay(c, path, b)
		if line := keyLine(b, "sandbox"); path == repoPath && line > 0 {
			out.ProjectSandbox, out.ProjectSandboxAt = &c.Sandbox, Origin{File: path, Line: line}
		}
	}
	return out, nil
}

// lay puts the keys c's file sets over out.
func (l *Layered) lay(c *Config, path string, b []byte) {
	dst, src := reflect.ValueOf(l.Config).Elem(), reflect.ValueOf(c).Elem()
	for i := 0; i < dst.NumField(); i++ {
		key := yamlKey(dst.Type().Field(i))
		line := keyLine(b, key)
		if line == 0 {
			continue
		}
		o := Origin{File: path, Line: line}
		if key == "sandbox" {
			l.Sandbox = l.Sandbox.Merge(c.Sandbox)
			l.From[key] = append(l.From[key], o)
			continue
		}
		dst.Field(i).Set(src.Field(i))
		l.From[key] = []Origin{o}
	}
}

// Keys are the top-level keys of a config file, in the order of Config.
func Keys() []string {
	t := reflect.TypeOf(Config{})
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = yamlKey(t.Field(i))
	}
	return out
}

// Value is the setting of key in c (nil for an unknown key).
func (c *Config) Value(key string) any {
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		if yamlKey(v.Type().Field(i)) == key {
			return v.Field(i).Interface()
		}
	}
	return nil
}

func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return k
}

// Duration accepts "90s", "5m", "1h30m".
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use e.g. 90s, 5m, 1h)", string(b))
	}
	*d = Duration(v)
	return nil
}

// ProgressPlaces are the values of `progress:` (and --progress).
var ProgressPlaces = []string{"ralph", "repo", "agents-md"}

// ProgressChoice names the values of `progress:` for an error.
func ProgressChoice() string {
	return strings.Join(ProgressPlaces[:len(ProgressPlaces)-1], ", ") + " or " + ProgressPlaces[len(ProgressPlaces)-1]
}

// parse parses config text; name is used in errors.
func parse(name string, b []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict()); err != nil {
		msg := plainTypeError(err, b, yaml.FormatError(err, false, true))
		if strings.Contains(msg, `unknown field "roles"`) {
			msg += "\n(roles, their triggers and per-role agents live in .ralph/roles.yaml: see `ralph roles --help`)"
		}
		return nil, fmt.Errorf("%s: %s", name, msg)
	}
	if err := c.checkSigns(name, b); err != nil {
		return nil, err
	}
	return &c, nil
}

// plainTypeError rewrites the first line of a YAML error about a value
// of the wrong kind ("cannot unmarshal string into Go struct field
// Config.Sandbox of type bool") as what the key takes, by its dotted
// name ("sandbox.enabled must be true or false, got "no""), keeping the
// position and the excerpt under it.
func plainTypeError(err error, b []byte, formatted string) string {
	var line int
	var what string
	var te *yaml.TypeError
	var ne *yaml.UnexpectedNodeTypeError
	switch {
	case errors.As(err, &te) && te.Token != nil && te.Token.Position != nil:
		line = te.Token.Position.Line
		what = fmt.Sprintf("must be %s, got %s", kindWords(te.DstType), quotedValue(te.Token))
	case errors.As(err, &ne) && ne.Token != nil && ne.Token.Position != nil:
		line = ne.Token.Position.Line
		what = fmt.Sprintf("must be %s, got %s", nodeWords(ne.Expected.String()), nodeWords(ne.Actual.String()))
	default:
		return formatted
	}
	key := keyPathAt(b, line)
	if key == "" {
		return formatted
	}
	first, rest, _ := strings.Cut(formatted, "\n")
	if i := strings.Index(first, "] "); i >= 0 {
		first = first[:i+2] + key + " " + what
	}
	if rest == "" {
		return first
	}
	return first + "\n" + rest
}

// kindWords says what a Go type takes, in the words of a YAML file.
func kindWords(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t == reflect.TypeOf(time.Duration(0)) || strings.HasSuffix(t.Name(), "Duration") {
			return "a duration such as 30s or 10m"
		}
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	case reflect.Map:
		return "a mapping (one key: value per line)"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct:
		return "a section of keys"
	}
	return "a " + t.Kind().String()
}

// nodeWords names a YAML node kind for people.
func nodeWords(kind string) string {
	switch strings.ToLower(kind) {
	case "mapping", "mappingvalue":
		return "a mapping (one key: value per line)"
	case "sequence":
		return "a list"
	case "string":
		return "text"
	}
	return strings.ToLower(kind)
}

// quotedValue is the value a token holds, as the file says it.
func quotedValue(tk *token.Token) string {
	switch tk.Type {
	case token.StringType, token.SingleQuoteType, token.DoubleQuoteType:
		return strconv.Quote(tk.Value)
	case token.SequenceStartType, token.SequenceEntryType:
		return "a list"
	case token.MappingStartType, token.MappingValueType:
		return "a mapping"
	}
	return tk.Value
}

// keyPathAt is the dotted key of the value on line (1-based) of a YAML
// file: the key on that line (or the nearest above it) and the keys of
// the less indented lines above, "sandbox.enabled".
func keyPathAt(b []byte, line int) string {
	lines := strings.Split(string(b), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	var path []string
	indent := -1
	for i := line - 1; i >= 0; i-- {
		l := lines[i]
		t := strings.TrimLeft(l, " ")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		in := len(l) - len(t)
		t = strings.TrimPrefix(t, "- ")
		k, _, ok := strings.Cut(t, ":")
		if !ok || strings.ContainsAny(k, " \t\"'[{") {
			continue
		}
		if indent < 0 || in < indent {
			path = append([]string{k}, path...)
			indent = in
			if in == 0 {
				break
			}
		}
	}
	return strings.Join(path, ".")
}

// checkSigns refuses negative numbers: no setting means anything below
// zero, and silently taking the default instead would hide the typo.
func (c *Config) checkSigns(name string, b []byte) error {
	var errs []error
	neg := func(key string, bad bool, v any) {
		if bad {
			errs = append(errs, fmt.Errorf("%s:%d: %s must not be negative, got %v", name, keyLine(b, key), key, v))
		}
	}
	if c.Progress != "" && !slices.Contains(ProgressPlaces, c.Progress) {
		errs = append(errs, fmt.Errorf("%s:%d: progress must be %s, got %q", name, keyLine(b, "progress"), ProgressChoice(), c.Progress))
	}
	if c.ProtectedRule != "" && c.ProtectedRule != "files" && c.ProtectedRule != "declarations" {
		errs = append(errs, fmt.Errorf("%s:%d: protected_rule must be files or declarations, got %q", name, keyLine(b, "protected_rule"), c.ProtectedRule))
	}
	for i, g := range c.Protected {
		if why := prd.GlobProblem(g); why != "" {
			errs = append(errs, fmt.Errorf("%s:%d: protected[%d] %q: %s", name, keyLine(b, "protected"), i, g, why))
		}
	}
	neg("max_iterations", c.MaxIterations < 0, c.MaxIterations)
	neg("progress_budget_tokens", c.ProgressBudgetTokens < 0, c.ProgressBudgetTokens)
	neg("max_attempts", c.MaxAttempts < 0, c.MaxAttempts)
	neg("iteration_timeout", c.IterationTimeout < 0, time.Duration(c.IterationTimeout))
	neg("gate_timeout", c.GateTimeout < 0, time.Duration(c.GateTimeout))
	neg("parallel", c.Parallel < 0, c.Parallel)
	neg("breaker", c.Breaker != nil && *c.Breaker < 0, derefInt(c.Breaker))
	neg("max_cost", c.MaxCost < 0, c.MaxCost)
	neg("max_tokens", c.MaxTokens < 0, c.MaxTokens)
	neg("transcript_max_bytes", c.TranscriptMaxBytes < 0, c.TranscriptMaxBytes)
	neg("rate_limit_backoff", c.RateLimitBackoff < 0, time.Duration(c.RateLimitBackoff))
	neg("ask_timeout", c.AskTimeout < 0, time.Duration(c.AskTimeout))
	neg("error_wait", c.ErrorWait != nil && *c.ErrorWait < 0, derefDuration(c.ErrorWait))
	neg("interval", c.Interval < 0, time.Duration(c.Interval))
	neg("max_item_iterations", c.MaxItemIterations < 0, c.MaxItemIterations)
	neg("test_fix", c.TestFix < 0, c.TestFix)
	neg("council", c.Council < 0, c.Council)
	neg("guidance_iterations", c.GuidanceIterations < 0, c.GuidanceIterations)
	neg("notify.timeout", c.Notify.Timeout < 0, time.Duration(c.Notify.Timeout))
	return errors.Join(errs...)
}

func derefDuration(p *Duration) time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(*p)
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// keyLine is the line of a top-level key in the YAML text (0 if not found).
func keyLine(b []byte, key string) int {
	for i, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key && !strings.HasPrefix(line, " ") {
			return i + 1
		}
	}
	return 0
}

// Template is what `ralph init` writes: every key commented out, so your
// own ~/.config/ralph/config.yaml (and the defaults) apply until this
// repository needs something else.
const Template = `# ralph settings for this repository; every key is also a ` + "`ralph run`" + ` flag,
# and flags win. A key set here wins over your own ~/.config/ralph/config.yaml;
# the keys below are commented out, so yours (or the default shown) apply.
# agent: claude                      # claude | codex | opencode | gemini | amp | copilot | native | cmd | scripted
# agent_cmd: "python3 my_agent.py"   # for agent: cmd
# agent_args: []                     # extra arguments for the agent CLI
# model: ""
# prd: prd.json
# promise: COMPLETE
# max_attempts: 3
# max_iterations: 30                 # default: 10 × stories
# iteration_timeout: 60m
# gate_timeout: 10m
# max_cost: 5.00                     # USD, across the run
# env:                               # extra environment for the agent
#   FOO: bar
`
