package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/ralph-loop/ralph/internal/proc"
)

// scripted is a deterministic agent that replays a script of file edits,
// commands and messages. It drives the demo and the tests; every line it
// prints says it is scripted, so nobody mistakes it for a model.
type scripted struct {
	Path   string
	Script *Script
	Runner proc.Runner
}

// Script is keyed by work item (story, task or stage id); each item has a
// list of turns, one per agent run on that item (the last repeats).
type Script struct {
	Items   map[string][]Turn `yaml:"items" json:"items"`
	Default []Turn            `yaml:"default" json:"default"`
}

// Turn is one agent run.
type Turn struct {
	Write     map[string]string `yaml:"write" json:"write"`   // path → content (created or replaced)
	Append    map[string]string `yaml:"append" json:"append"` // path → text appended
	Delete    []string          `yaml:"delete" json:"delete"`
	Run       [][]string        `yaml:"run" json:"run"` // argv lists run in the work tree; "ralph" means this binary
	Sleep     string            `yaml:"sleep" json:"sleep"`
	Output    string            `yaml:"output" json:"output"`   // printed before the message
	Message   string            `yaml:"message" json:"message"` // final assistant message
	Exit      int               `yaml:"exit" json:"exit"`
	RateLimit *ScriptRateLimit  `yaml:"rate_limit" json:"rate_limit"`
}

// ScriptRateLimit makes the turn report a rate limit instead of working.
type ScriptRateLimit struct {
	Seconds int    `yaml:"seconds" json:"seconds"`
	Message string `yaml:"message" json:"message"`
}

func init() {
	register("scripted", func(o Options) (Agent, error) {
		if o.Script == "" {
			return nil, errors.New("--agent scripted needs --script FILE")
		}
		s, err := loadScript(o.Script)
		if err != nil {
			return nil, err
		}
		return &scripted{Path: o.Script, Script: s, Runner: proc.Exec{}}, nil
	})
}

// loadScript reads a YAML (or JSON) script, strictly: an unknown key is an
// error naming its line, so a typo never silently does nothing.
func loadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseScript(path, b)
}

// parseScript parses script text; name is used in errors.
func parseScript(name string, b []byte) (*Script, error) {
	var s Script
	if err := yaml.UnmarshalWithOptions(b, &s, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yaml.FormatError(err, false, true))
	}
	for id, turns := range s.Items {
		for i, t := range turns {
			if t.Sleep != "" {
				if _, err := time.ParseDuration(t.Sleep); err != nil {
					return nil, fmt.Errorf("%s: items.%s[%d].sleep: %v", name, id, i, err)
				}
			}
		}
	}
	return &s, nil
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) Plan(req Request) (Invocation, error) {
	return Invocation{Note: fmt.Sprintf("scripted agent (in-process) replaying %s for %s, run %d", s.Path, req.ItemID, req.Attempt)}, nil
}

func (s *scripted) turn(req Request) (Turn, int, bool) {
	turns := s.Script.Items[req.ItemID]
	if len(turns) == 0 {
		turns = s.Script.Default
	}
	if len(turns) == 0 {
		return Turn{}, 0, false
	}
	i := req.Attempt - 1
	if i < 0 {
		i = 0
	}
	if i >= len(turns) {
		i = len(turns) - 1
	}
	return turns[i], i, true
}

func (s *scripted) Run(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	w := req.Transcript
	if w == nil {
		w = io.Discard
	}
	say := func(format string, a ...any) { fmt.Fprintf(w, "[scripted agent] "+format+"\n", a...) }
	res := Result{}
	t, idx, ok := s.turn(req)
	if !ok {
		say("no turns for %s in %s: doing nothing", req.ItemID, s.Path)
		res.Duration = time.Since(start)
		return res, nil
	}
	say("replaying turn %d for %s from %s (not a model)", idx+1, req.ItemID, s.Path)
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	if t.RateLimit != nil {
		res.RateLimit = &RateLimit{ResetAt: time.Now().Add(time.Duration(t.RateLimit.Seconds) * time.Second), Message: t.RateLimit.Message}
		if res.RateLimit.Message == "" {
			res.RateLimit.Message = "scripted rate limit"
		}
		say("rate limited: %s", res.RateLimit.Message)
		res.ExitCode = 1
		res.Duration = time.Since(start)
		return res, nil
	}
	if t.Sleep != "" {
		d, _ := time.ParseDuration(t.Sleep)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			res.TimedOut = true
			res.ExitCode = -1
			res.ErrorText = "timed out"
			res.Duration = time.Since(start)
			return res, nil
		}
	}
	fail := func(err error) (Result, error) {
		say("error: %v", err)
		res.ExitCode = 1
		res.IsError = true
		res.ErrorText = err.Error()
		res.Duration = time.Since(start)
		return res, nil
	}
	for _, p := range t.Delete {
		full, err := confine(req.Dir, p)
		if err != nil {
			return fail(err)
		}
		say("delete %s", p)
		if err := os.RemoveAll(full); err != nil {
			return fail(err)
		}
	}
	for _, p := range sortedKeys(t.Write) {
		full, err := confine(req.Dir, p)
		if err != nil {
			return fail(err)
		}
		say("write %s (%d bytes)", p, len(t.Write[p]))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(full, []byte(t.Write[p]), 0o644); err != nil {
			return fail(err)
		}
	}
	for _, p := range sortedKeys(t.Append) {
		full, err := confine(req.Dir, p)
		if err != nil {
			return fail(err)
		}
		say("append %s", p)
		f, err := os.OpenFile(full, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fail(err)
		}
		_, err = f.WriteString(t.Append[p])
		f.Close()
		if err != nil {
			return fail(err)
		}
	}
	self, _ := os.Executable()
	for _, argv := range t.Run {
		if len(argv) == 0 {
			continue
		}
		argv = append([]string{}, argv...)
		if argv[0] == "ralph" && os.Getenv("RALPH_BIN") == "" && self != "" {
			argv[0] = self
		} else if argv[0] == "ralph" && os.Getenv("RALPH_BIN") != "" {
			argv[0] = os.Getenv("RALPH_BIN")
		}
		say("run %s", proc.QuoteArgv(argv))
		r, err := s.Runner.Run(ctx, proc.Cmd{Argv: argv, Dir: req.Dir, Env: proc.Environ(nil, req.Env...), Stdout: w, Stderr: w, Stdin: strings.NewReader("")})
		if err != nil {
			if ctx.Err() != nil {
				res.TimedOut = true
				res.ExitCode = -1
				res.Duration = time.Since(start)
				return res, nil
			}
			return fail(err)
		}
		if r.TimedOut {
			res.TimedOut = true
			res.ExitCode = -1
			res.Duration = time.Since(start)
			return res, nil
		}
		if r.ExitCode != 0 {
			say("command exited %d", r.ExitCode)
		}
	}
	if t.Output != "" {
		fmt.Fprintln(w, t.Output)
	}
	if t.Message != "" {
		say("final message:")
		fmt.Fprintln(w, t.Message)
	}
	res.FinalText = t.Message
	res.ExitCode = t.Exit
	if t.Exit != 0 {
		res.ErrorText = fmt.Sprintf("scripted exit %d", t.Exit)
	}
	res.Turns = 1
	res.Duration = time.Since(start)
	return res, nil
}

// confine resolves p inside dir and refuses paths that escape it.
func confine(dir, p string) (string, error) {
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(dir, p)
	}
	full = filepath.Clean(full)
	rel, err := filepath.Rel(filepath.Clean(dir), full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q escapes the work tree", p)
	}
	return full, nil
}

// Confine is confine for other in-process agents (native tools).
func Confine(dir, p string) (string, error) { return confine(dir, p) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
