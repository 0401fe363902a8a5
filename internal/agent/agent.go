// Package agent turns one iteration's request (prompt, work tree, model,
// timeout) into a run of some coding agent and parses what it printed into
// a Result the engine can judge. Adapters differ only in argv, environment
// and output format; the process plumbing lives here once.
package agent

import (
	"context"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/usage"
)

// Request is everything an adapter needs for one run.
type Request struct {
	Prompt     string
	PromptFile string // the prompt is also written here ($RALPH_PROMPT_FILE)
	Dir        string // work tree the agent runs in
	Model      string
	Args       []string // extra adapter arguments (config agent_args)
	Env        []string // KEY=VALUE set by ralph on top of the inherited env
	Timeout    time.Duration
	Transcript io.Writer // raw output is streamed here, never held whole in memory
	ItemID     string    // story / task / stage id
	Iteration  int       // global iteration number
	Attempt    int       // 1-based attempt on ItemID
	Role       string
	Started    func(pid int) // told the agent process's pid (its group id)
	// ReadOnly are files of the work tree the agent must not change (the
	// item's protected tests): its sandbox keeps them read-only.
	ReadOnly []string
}

// Usage is token and cost accounting reported by the agent.
type Usage struct {
	InputTokens      int64   `json:"input_tokens,omitempty"`
	OutputTokens     int64   `json:"output_tokens,omitempty"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CacheReadTokens += u2.CacheReadTokens
	u.CacheWriteTokens += u2.CacheWriteTokens
	u.CostUSD += u2.CostUSD
}

// RateLimit says the agent hit a rate or usage limit; the engine waits
// instead of spending an attempt.
type RateLimit struct {
	ResetAt time.Time `json:"reset_at,omitempty"` // zero = unknown, back off
	Message string    `json:"message"`
}

// Result is what one agent run produced.
type Result struct {
	FinalText string `json:"final_text"` // last assistant message only
	// Learnings is what a plain-text agent reported as learnings anywhere
	// in its output (a "## Learnings" section, LEARNING: lines), when that
	// is more than its final message holds.
	Learnings         string        `json:"learnings,omitempty"`
	ExitCode          int           `json:"exit_code"`
	TimedOut          bool          `json:"timed_out,omitempty"`
	Duration          time.Duration `json:"duration"`
	Turns             int           `json:"turns,omitempty"`
	Usage             Usage         `json:"usage"`
	SessionID         string        `json:"session_id,omitempty"`
	IsError           bool          `json:"is_error,omitempty"`
	ErrorText         string        `json:"error,omitempty"`
	PermissionDenials int           `json:"permission_denials,omitempty"`
	RateLimit         *RateLimit    `json:"rate_limit,omitempty"`
	// Worker and WorkerHost name the worker that ran the agent (ralph
	// coordinator's remote agent); "" when it ran here.
	Worker     string `json:"worker,omitempty"`
	WorkerHost string `json:"worker_host,omitempty"`
}

// Failed reports whether the run itself failed (as opposed to the work
// being incomplete, which the gates decide).
func (r Result) Failed() bool { return r.ExitCode != 0 || r.TimedOut || r.IsError }

// Invocation is what an adapter would run. `ralph run --dry-run` prints it.
type Invocation struct {
	Argv        []string
	Env         []string          // only the variables ralph sets
	PromptStdin bool              // prompt is written to stdin, then stdin closes
	Files       map[string]string // files written before the run (path → content)
	Note        string            // for in-process agents: what they will do
}

// Agent is one backend.
type Agent interface {
	Name() string
	Plan(req Request) (Invocation, error)
	Run(ctx context.Context, req Request) (Result, error)
}

// secretWords mark env variables whose values are masked in dry-run output.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH"}

// MaskEnv returns KEY=VALUE pairs with secret values masked, sorted.
func MaskEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		up := strings.ToUpper(k)
		for _, w := range secretWords {
			if strings.Contains(up, w) && v != "" {
				if len(v) > 8 {
					v = v[:3] + "…" + v[len(v)-2:]
				} else {
					v = "****"
				}
				break
			}
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Registry maps --agent names to constructors.
type Factory func(opts Options) (Agent, error)

// Options configure an adapter (from flags and config).
type Options struct {
	Command   []string // for cmd: the argv; for CLI adapters: override the binary path/argv prefix
	Script    string   // for scripted: the script file
	Model     string
	Args      []string
	BaseURL   string
	APIKeyEnv string
	Provider  string // native: anthropic | openai; copilot: the API of its base URL (openai | anthropic)
}

var registry = map[string]Factory{}

// register adds a named adapter; called from init() of each adapter file.
func register(name string, f Factory) { registry[name] = f }

// New builds the named adapter.
func New(name string, opts Options) (Agent, error) {
	f, ok := registry[name]
	if !ok {
		return nil, usage.Errorf("unknown agent %q%s (known: %s)", name, usage.DidYouMean(name, Names()), strings.Join(Names(), ", "))
	}
	return f(opts)
}

// Names lists registered adapters.
func Names() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
