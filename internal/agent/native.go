package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/llm"
	"github.com/ralph-loop/ralph/internal/proc"
)

// Native is ralph's own tool loop: it calls a model API directly (Anthropic
// Messages or an OpenAI-compatible Chat Completions server such as OpenAI,
// Ollama or vLLM) and runs the model's tool calls itself, confined to the
// work tree. For people who have an API key (or a local model) but no
// coding-agent CLI.
//
// Configuration, first non-empty wins:
//
//	provider  Options.Provider, $RALPH_NATIVE_PROVIDER, else anthropic
//	          (openai when only $OPENAI_API_KEY is set)
//	base URL  Options.BaseURL, $RALPH_NATIVE_BASE_URL, the vendor endpoint
//	model     Request.Model, Options.Model, $RALPH_NATIVE_MODEL
//	key       $<Options.APIKeyEnv>, else $ANTHROPIC_API_KEY / $OPENAI_API_KEY
//	          (may be empty when the base URL is loopback, e.g. Ollama)
//
// Agent args (Options.Args / Request.Args), KEY=VALUE: max_turns=N
// (default 50), max_tokens=N, bash_timeout=SECONDS (default 120).
type Native struct {
	Provider    string
	BaseURL     string
	Model       string
	APIKey      string
	APIKeyEnv   string // the variable the key came from (for messages)
	Args        []string
	MaxTurns    int
	MaxTokens   int
	BashTimeout time.Duration

	// Client overrides the provider built from the fields above (tests).
	Client llm.Provider
	// Runner runs bash tool commands; nil = proc.Exec{}.
	Runner proc.Runner
}

// Native agent defaults and limits.
const (
	nativeDefaultMaxTurns    = 50
	nativeDefaultBashTimeout = 120 * time.Second
	nativeOutputCap          = 30 << 10  // bash, grep, list_files output
	nativeReadCap            = 256 << 10 // read_file
	nativeTranscriptCap      = 2000      // tool results echoed to the transcript
)

func init() {
	register("native", func(o Options) (Agent, error) { return newNative(o, os.Getenv) })
}

// newNative resolves the native agent's configuration from opts and the
// environment (getenv). Missing model or key is reported by Plan and Run,
// since the model may still come with the request.
func newNative(o Options, getenv func(string) string) (*Native, error) {
	n := &Native{
		Provider: strings.ToLower(strings.TrimSpace(o.Provider)),
		BaseURL:  strings.TrimSpace(o.BaseURL),
		Model:    strings.TrimSpace(o.Model),
		Args:     append([]string{}, o.Args...),
	}
	if n.Provider == "" {
		n.Provider = strings.ToLower(strings.TrimSpace(getenv("RALPH_NATIVE_PROVIDER")))
	}
	if n.Provider == "" {
		n.Provider = llm.Anthropic
		if getenv("ANTHROPIC_API_KEY") == "" && getenv("OPENAI_API_KEY") != "" {
			n.Provider = llm.OpenAI
		}
	}
	switch n.Provider {
	case llm.Anthropic, llm.OpenAI:
	case "ollama", "vllm", "openai-compatible":
		n.Provider = llm.OpenAI
	default:
		return nil, fmt.Errorf("native agent: unknown provider %q (want anthropic or openai)", n.Provider)
	}
	if n.BaseURL == "" {
		n.BaseURL = strings.TrimSpace(getenv("RALPH_NATIVE_BASE_URL"))
	}
	if n.Model == "" {
		n.Model = strings.TrimSpace(getenv("RALPH_NATIVE_MODEL"))
	}
	n.APIKeyEnv = o.APIKeyEnv
	if n.APIKeyEnv == "" {
		n.APIKeyEnv = "ANTHROPIC_API_KEY"
		if n.Provider == llm.OpenAI {
			n.APIKeyEnv = "OPENAI_API_KEY"
		}
	}
	n.APIKey = strings.TrimSpace(getenv(n.APIKeyEnv))
	if err := n.applyArgs(n.Args); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Native) applyArgs(args []string) error {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("native agent: argument %q is not KEY=VALUE (known: max_turns, max_tokens, bash_timeout)", a)
		}
		k = strings.ReplaceAll(strings.ToLower(k), "-", "_")
		num, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || num <= 0 {
			return fmt.Errorf("native agent: %s=%q: want a positive integer", k, v)
		}
		switch k {
		case "max_turns":
			n.MaxTurns = num
		case "max_tokens":
			n.MaxTokens = num
		case "bash_timeout", "bash_timeout_seconds":
			n.BashTimeout = time.Duration(num) * time.Second
		default:
			return fmt.Errorf("native agent: unknown argument %q (known: max_turns, max_tokens, bash_timeout)", k)
		}
	}
	return nil
}

func (n *Native) Name() string { return "native" }

// nativeRun is one run's resolved settings.
type nativeRun struct {
	provider, baseURL, model string
	maxTurns, maxTokens      int
	bashTimeout              time.Duration
}

func (n *Native) resolve(req Request) (nativeRun, error) {
	r := nativeRun{provider: n.Provider, baseURL: n.BaseURL, model: n.Model, maxTurns: n.MaxTurns, maxTokens: n.MaxTokens, bashTimeout: n.BashTimeout}
	if req.Model != "" {
		r.model = req.Model
	}
	if len(req.Args) > 0 {
		c := *n
		if err := c.applyArgs(req.Args); err != nil {
			return r, err
		}
		r.maxTurns, r.maxTokens, r.bashTimeout = c.MaxTurns, c.MaxTokens, c.BashTimeout
	}
	if r.maxTurns <= 0 {
		r.maxTurns = nativeDefaultMaxTurns
	}
	if r.bashTimeout <= 0 {
		r.bashTimeout = nativeDefaultBashTimeout
	}
	if r.baseURL == "" {
		r.baseURL = llm.DefaultBaseURL(r.provider)
	}
	if n.Client != nil {
		if r.model == "" {
			r.model = "test-model"
		}
		return r, nil
	}
	if r.model == "" {
		return r, fmt.Errorf("native agent: no model: set --model, agent model in the config, or RALPH_NATIVE_MODEL (provider %s)", r.provider)
	}
	if n.APIKey == "" && !llm.IsLoopback(r.baseURL) {
		return r, fmt.Errorf("native agent: no API key: %s is empty (set it, name another variable with api_key_env, or point RALPH_NATIVE_BASE_URL at a local server)", n.APIKeyEnv)
	}
	return r, nil
}

func (n *Native) maskedKey() string {
	if n.APIKey == "" {
		return "(none)"
	}
	m := MaskEnv([]string{"KEY=" + n.APIKey})
	_, v, _ := strings.Cut(m[0], "=")
	return v
}

func (n *Native) Plan(req Request) (Invocation, error) {
	r, err := n.resolve(req)
	if err != nil {
		return Invocation{}, err
	}
	note := fmt.Sprintf("native agent (in-process tool loop): provider %s, base URL %s, model %s, key $%s=%s, max %d turns; tools read_file write_file edit_file list_files grep bash confined to %s",
		r.provider, r.baseURL, r.model, n.APIKeyEnv, n.maskedKey(), r.maxTurns, req.Dir)
	return Invocation{Note: note}, nil
}

const nativeSystemPrompt = `You are a coding agent working in the directory %s (the work tree). Use the tools to read, search, edit and test the code there; every path is relative to the work tree and may not leave it. Run commands with the bash tool (cwd is the work tree). Work step by step until the task is done, then end with a final message (no tool calls) summarising what you did, including any completion marker the task asks for.`

func (n *Native) Run(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	var res Result
	w := req.Transcript
	if w == nil {
		w = io.Discard
	}
	say := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	done := func() (Result, error) {
		res.Duration = time.Since(start)
		return res, nil
	}
	r, err := n.resolve(req)
	if err != nil {
		say("! %v", err)
		res.IsError, res.ExitCode, res.ErrorText = true, 1, err.Error()
		return done()
	}
	client := n.Client
	if client == nil {
		client, err = llm.New(llm.Config{Provider: r.provider, BaseURL: r.baseURL, APIKey: n.APIKey})
		if err != nil {
			res.IsError, res.ExitCode, res.ErrorText = true, 1, err.Error()
			return done()
		}
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		res.IsError, res.ExitCode, res.ErrorText = true, 1, err.Error()
		return done()
	}
	tools := &nativeTools{dir: dir, runner: n.Runner, bashTimeout: r.bashTimeout, env: nativeEnv(req.Env, n.APIKeyEnv)}
	if tools.runner == nil {
		tools.runner = proc.Exec{}
	}
	say("# native agent: provider %s, base URL %s, model %s, max %d turns, work tree %s", r.provider, r.baseURL, r.model, r.maxTurns, dir)
	say("> user prompt (%d bytes)", len(req.Prompt))
	conv := llm.Request{
		Model:     r.model,
		System:    fmt.Sprintf(nativeSystemPrompt, dir),
		Messages:  []llm.Message{{Role: llm.RoleUser, Text: req.Prompt}},
		Tools:     nativeToolDefs(),
		MaxTokens: r.maxTokens,
	}
	timedOut := func() (Result, error) {
		res.TimedOut, res.ExitCode = true, -1
		res.ErrorText = fmt.Sprintf("timed out after %s", req.Timeout)
		say("! %s", res.ErrorText)
		res.Duration = time.Since(start)
		if ctx.Err() != nil { // the caller cancelled, not our timeout
			res.TimedOut = false
			res.ErrorText = "cancelled"
			return res, ctx.Err()
		}
		return res, nil
	}
	for {
		if res.Turns >= r.maxTurns {
			res.IsError, res.ExitCode = true, 1
			res.ErrorText = fmt.Sprintf("stopped after %d turns without a final message (raise with agent arg max_turns=N)", r.maxTurns)
			say("! %s", res.ErrorText)
			return done()
		}
		if runCtx.Err() != nil {
			return timedOut()
		}
		resp, err := client.Complete(runCtx, conv)
		if err != nil {
			if runCtx.Err() != nil {
				return timedOut()
			}
			var rl *llm.RateLimitError
			if errors.As(err, &rl) {
				res.RateLimit = &RateLimit{Message: rl.Message}
				if rl.RetryAfter > 0 {
					res.RateLimit.ResetAt = time.Now().Add(rl.RetryAfter)
				}
				if res.RateLimit.Message == "" {
					res.RateLimit.Message = "rate limited (HTTP 429)"
				}
				res.ExitCode = 1
				say("! rate limited: %s (retry after %s)", rl.Message, rl.RetryAfter)
				return done()
			}
			res.IsError, res.ExitCode, res.ErrorText = true, 1, err.Error()
			say("! %v", err)
			return done()
		}
		res.Turns++
		res.Usage.Add(Usage{
			InputTokens:      resp.Usage.InputTokens,
			OutputTokens:     resp.Usage.OutputTokens,
			CacheReadTokens:  resp.Usage.CacheReadTokens,
			CacheWriteTokens: resp.Usage.CacheWriteTokens,
		})
		say("< turn %d (stop %s, tokens in %d out %d)", res.Turns, resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
		if resp.Text != "" {
			say("%s", resp.Text)
		}
		conv.Messages = append(conv.Messages, llm.Message{Role: llm.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			res.FinalText = resp.Text
			if resp.StopReason == llm.StopMaxTokens {
				say("# note: the final message hit the max_tokens limit")
			}
			say("# done after %d turns (tokens in %d out %d)", res.Turns, res.Usage.InputTokens, res.Usage.OutputTokens)
			return done()
		}
		results := make([]llm.ToolResult, 0, len(resp.ToolCalls))
		for _, tc := range resp.ToolCalls {
			say("> tool %s %s", tc.Name, summarizeInput(tc.Input))
			out, isErr := tools.call(runCtx, tc.Name, tc.Input)
			mark := "<"
			if isErr {
				mark = "< error:"
			}
			say("%s %s", mark, indentTrunc(out, nativeTranscriptCap))
			results = append(results, llm.ToolResult{CallID: tc.ID, Name: tc.Name, Content: out, IsError: isErr})
		}
		conv.Messages = append(conv.Messages, llm.Message{Role: llm.RoleUser, ToolResults: results})
	}
}

// nativeEnv is the bash tool's environment: inherited plus ralph's, minus
// the API key the agent uses (a model has no business printing it).
func nativeEnv(extra []string, keyEnv string) []string {
	env := proc.Environ(nil, extra...)
	if keyEnv == "" {
		return env
	}
	out := env[:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == keyEnv {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// summarizeInput renders tool arguments on one line: long strings become
// their size, so a write_file does not paste the whole file.
func summarizeInput(in json.RawMessage) string {
	var m map[string]any
	if err := json.Unmarshal(in, &m); err != nil {
		return "(invalid arguments: " + trunc(string(in), 200) + ")"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var v string
		switch x := m[k].(type) {
		case string:
			if k != "command" && (len(x) > 120 || strings.Contains(x, "\n")) {
				v = fmt.Sprintf("(%d bytes)", len(x))
			} else {
				v = x
				if strings.ContainsAny(v, " \t\n\"'") || v == "" {
					v = strconv.Quote(trunc(v, 200))
				}
			}
		default:
			b, _ := json.Marshal(x)
			v = trunc(string(b), 120)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func indentTrunc(s string, n int) string {
	if len(s) > n {
		s = s[:n] + fmt.Sprintf("\n… (%d more bytes)", len(s)-n)
	}
	s = strings.TrimRight(s, "\n")
	return strings.ReplaceAll(s, "\n", "\n  ")
}

// ---- tools ----

type nativeTools struct {
	dir         string
	runner      proc.Runner
	bashTimeout time.Duration
	env         []string
}

func schema(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func strProp(desc string) map[string]any {
	return map[string]any{"type": "string", "description": desc}
}

func nativeToolDefs() []llm.Tool {
	return []llm.Tool{
		{Name: "read_file", Description: "Read a text file in the work tree.", Schema: schema([]string{"path"}, map[string]any{
			"path": strProp("file path relative to the work tree"),
		})},
		{Name: "write_file", Description: "Create or overwrite a file in the work tree with the given content (parent directories are created).", Schema: schema([]string{"path", "content"}, map[string]any{
			"path":    strProp("file path relative to the work tree"),
			"content": strProp("the complete new file content"),
		})},
		{Name: "edit_file", Description: "Replace old_string with new_string in a file. old_string must match the file exactly (whitespace included) and exactly once; include surrounding lines to make it unique.", Schema: schema([]string{"path", "old_string", "new_string"}, map[string]any{
			"path":       strProp("file path relative to the work tree"),
			"old_string": strProp("exact text to replace; must occur exactly once"),
			"new_string": strProp("replacement text"),
		})},
		{Name: "list_files", Description: "List files under a directory of the work tree, recursively (.git is skipped).", Schema: schema([]string{}, map[string]any{
			"path": strProp("directory relative to the work tree; default the work tree itself"),
		})},
		{Name: "grep", Description: "Search files for a regular expression (Go RE2 syntax); prints path:line: text.", Schema: schema([]string{"pattern"}, map[string]any{
			"pattern": strProp("regular expression"),
			"path":    strProp("file or directory to search, relative to the work tree; default all"),
		})},
		{Name: "bash", Description: "Run a shell command with bash -c in the work tree; prints stdout and stderr and the exit code. Default timeout 120 seconds.", Schema: schema([]string{"command"}, map[string]any{
			"command":         strProp("the command"),
			"timeout_seconds": map[string]any{"type": "integer", "description": "timeout in seconds (default 120)"},
		})},
	}
}

// call runs one tool; the bool is true for an error result.
func (t *nativeTools) call(ctx context.Context, name string, input json.RawMessage) (string, bool) {
	var args struct {
		Path           string   `json:"path"`
		Content        *string  `json:"content"`
		OldString      *string  `json:"old_string"`
		NewString      *string  `json:"new_string"`
		Pattern        string   `json:"pattern"`
		Command        string   `json:"command"`
		TimeoutSeconds *float64 `json:"timeout_seconds"`
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return fmt.Sprintf("invalid arguments for %s: %v", name, err), true
	}
	var out string
	var err error
	if name == "write_file" || name == "edit_file" {
		if err := t.mayWrite(ctx, args.Path); err != nil {
			return err.Error(), true
		}
	}
	switch name {
	case "read_file":
		out, err = t.readFile(args.Path)
	case "write_file":
		if args.Content == nil {
			err = errors.New("write_file needs content")
			break
		}
		out, err = t.writeFile(args.Path, *args.Content)
	case "edit_file":
		if args.OldString == nil || args.NewString == nil {
			err = errors.New("edit_file needs old_string and new_string")
			break
		}
		out, err = t.editFile(args.Path, *args.OldString, *args.NewString)
	case "list_files":
		out, err = t.listFiles(args.Path)
	case "grep":
		out, err = t.grep(args.Pattern, args.Path)
	case "bash":
		timeout := t.bashTimeout
		if args.TimeoutSeconds != nil && *args.TimeoutSeconds > 0 {
			timeout = time.Duration(*args.TimeoutSeconds * float64(time.Second))
		}
		return t.bash(ctx, args.Command, timeout)
	default:
		err = fmt.Errorf("unknown tool %q (tools: read_file, write_file, edit_file, list_files, grep, bash)", name)
	}
	if err != nil {
		return err.Error(), true
	}
	return out, false
}

// path confines p to the work tree, lexically and through symlinks.
func (t *nativeTools) path(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("path is empty")
	}
	full, err := Confine(t.dir, p)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(t.dir)
	if err != nil {
		return "", err
	}
	// Resolve the longest existing prefix; the rest does not exist yet.
	existing, rest := full, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("path %q: %v", p, err)
	}
	rel, err := filepath.Rel(root, filepath.Join(resolved, rest))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q escapes the work tree (through a symlink)", p)
	}
	return full, nil
}

// writeChecker is what a sandbox (internal/sandbox's session, on the
// context as the proc.Confiner) says a confined process may write. The
// file tools write from ralph's own process, so they ask it, and refuse
// what the agent's commands could not write either (.git/config,
// .git/hooks, .ralph/…).
type writeChecker interface{ MayWrite(path string) bool }

func (t *nativeTools) mayWrite(ctx context.Context, p string) error {
	wc, ok := proc.ConfinerOf(ctx).(writeChecker)
	if !ok {
		return nil
	}
	full, err := t.path(p)
	if err != nil {
		return err
	}
	if !wc.MayWrite(full) {
		return fmt.Errorf("%s: the sandbox does not let the agent write there (read-only: .git/config, .git/hooks, .git/info and .ralph/)", t.rel(full))
	}
	return nil
}

func (t *nativeTools) rel(full string) string {
	r, err := filepath.Rel(t.dir, full)
	if err != nil {
		return full
	}
	return filepath.ToSlash(r)
}

func (t *nativeTools) readFile(p string) (string, error) {
	full, err := t.path(p)
	if err != nil {
		return "", err
	}
	f, err := os.Open(full)
	if err != nil {
		return "", fmt.Errorf("read_file %s: %v", p, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("read_file %s: is a directory (use list_files)", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, nativeReadCap+1))
	if err != nil {
		return "", err
	}
	if len(b) > nativeReadCap {
		return string(b[:nativeReadCap]) + fmt.Sprintf("\n[truncated: file is %d bytes, showing the first %d]", st.Size(), nativeReadCap), nil
	}
	if len(b) == 0 {
		return "(empty file)", nil
	}
	return string(b), nil
}

func (t *nativeTools) writeFile(p, content string) (string, error) {
	full, err := t.path(p)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return "", err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(full); err == nil {
		if st.IsDir() {
			return "", fmt.Errorf("write_file %s: is a directory", p)
		}
		mode = st.Mode().Perm()
	}
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s (%d bytes)", t.rel(full), len(content)), nil
}

func (t *nativeTools) editFile(p, old, new string) (string, error) {
	full, err := t.path(p)
	if err != nil {
		return "", err
	}
	if old == "" {
		return "", errors.New("edit_file: old_string is empty; use write_file to create or replace a whole file")
	}
	st, err := os.Stat(full)
	if err != nil {
		return "", fmt.Errorf("edit_file %s: %v", p, errors.Unwrap(err))
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return "", err
	}
	s := string(b)
	switch n := strings.Count(s, old); n {
	case 0:
		return "", fmt.Errorf("edit_file %s: old_string not found; it must match the file exactly, including whitespace and indentation (read_file it first)", p)
	case 1:
	default:
		return "", fmt.Errorf("edit_file %s: old_string occurs %d times; include more surrounding text so it matches exactly once", p, n)
	}
	if old == new {
		return "", fmt.Errorf("edit_file %s: old_string and new_string are the same", p)
	}
	s = strings.Replace(s, old, new, 1)
	if err := os.WriteFile(full, []byte(s), st.Mode().Perm()); err != nil {
		return "", err
	}
	return fmt.Sprintf("edited %s (replaced %d bytes with %d)", t.rel(full), len(old), len(new)), nil
}

const nativeMaxListed = 2000

func (t *nativeTools) listFiles(p string) (string, error) {
	if p == "" {
		p = "."
	}
	full, err := t.path(p)
	if err != nil {
		return "", err
	}
	var out capWriter
	out.max = nativeOutputCap
	n := 0
	err = filepath.WalkDir(full, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if path == full {
			if !d.IsDir() {
				fmt.Fprintln(&out, t.rel(path))
			}
			return nil
		}
		n++
		if n > nativeMaxListed {
			return fs.SkipAll
		}
		name := t.rel(path)
		if d.IsDir() {
			name += "/"
		}
		fmt.Fprintln(&out, name)
		return nil
	})
	if err != nil {
		return "", err
	}
	s := out.String()
	if n > nativeMaxListed {
		s += fmt.Sprintf("[stopped after %d entries; list a subdirectory]\n", nativeMaxListed)
	}
	if s == "" {
		s = "(no files)"
	}
	return s, nil
}

const (
	nativeGrepMaxMatches = 200
	nativeGrepMaxFile    = 4 << 20
	nativeGrepLineCap    = 300
)

func (t *nativeTools) grep(pattern, p string) (string, error) {
	if pattern == "" {
		return "", errors.New("grep: pattern is empty")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("grep: bad pattern: %v", err)
	}
	if p == "" {
		p = "."
	}
	full, err := t.path(p)
	if err != nil {
		return "", err
	}
	var out capWriter
	out.max = nativeOutputCap
	matches := 0
	err = filepath.WalkDir(full, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > nativeGrepMaxFile {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			return nil // unreadable or binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !re.MatchString(line) {
				continue
			}
			matches++
			if matches > nativeGrepMaxMatches {
				return fs.SkipAll
			}
			fmt.Fprintf(&out, "%s:%d: %s\n", t.rel(path), i+1, trunc(strings.TrimRight(line, "\r"), nativeGrepLineCap))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	s := out.String()
	if matches > nativeGrepMaxMatches {
		s += fmt.Sprintf("[stopped after %d matches; narrow the pattern or path]\n", nativeGrepMaxMatches)
	}
	if s == "" {
		s = "(no matches)"
	}
	return s, nil
}

func (t *nativeTools) bash(ctx context.Context, command string, timeout time.Duration) (string, bool) {
	if strings.TrimSpace(command) == "" {
		return "bash: command is empty", true
	}
	out := &headTail{head: nativeOutputCap / 3, tail: TailBuffer{Max: nativeOutputCap - nativeOutputCap/3}}
	lw := &lockedWriter{w: out}
	res, err := t.runner.Run(ctx, proc.Cmd{
		Argv:    []string{"bash", "-c", command},
		Dir:     t.dir,
		Env:     t.env,
		Stdin:   strings.NewReader(""),
		Stdout:  lw,
		Stderr:  lw,
		Timeout: timeout,
	})
	s := out.String()
	if err != nil {
		return s + fmt.Sprintf("\n[could not run: %v]", err), true
	}
	if res.TimedOut {
		return s + fmt.Sprintf("\n[timed out after %s; the command was killed]", timeout), true
	}
	if s == "" {
		s = "(no output)\n"
	} else if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	s += fmt.Sprintf("[exit code %d]", res.ExitCode)
	return s, res.ExitCode != 0
}

// capWriter keeps the first max bytes and counts the rest.
type capWriter struct {
	max     int
	buf     bytes.Buffer
	dropped int
}

func (c *capWriter) Write(b []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(b) {
		c.buf.Write(b)
	} else {
		if room > 0 {
			c.buf.Write(b[:room])
		}
		c.dropped += len(b) - max(room, 0)
	}
	return len(b), nil
}

func (c *capWriter) String() string {
	if c.dropped == 0 {
		return c.buf.String()
	}
	return c.buf.String() + fmt.Sprintf("\n[output truncated: %d more bytes not shown]\n", c.dropped)
}

// headTail keeps the first head bytes and the last tail.Max bytes of a
// stream (a test run's summary is at the end, the first error near the top).
type headTail struct {
	head  int
	buf   []byte
	tail  TailBuffer
	total int
}

func (h *headTail) Write(b []byte) (int, error) {
	n := len(b)
	h.total += n
	if room := h.head - len(h.buf); room > 0 {
		k := min(room, len(b))
		h.buf = append(h.buf, b[:k]...)
		b = b[k:]
	}
	if len(b) > 0 {
		_, _ = h.tail.Write(b)
	}
	return n, nil
}

func (h *headTail) String() string {
	shown := len(h.buf) + len(h.tail.buf)
	if shown == h.total {
		return string(h.buf) + h.tail.String()
	}
	return string(h.buf) + fmt.Sprintf("\n[output truncated: %d bytes total, %d bytes omitted here]\n", h.total, h.total-shown) + h.tail.String()
}
