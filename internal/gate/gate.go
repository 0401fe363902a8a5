// Package gate runs quality gates (typecheck, lint, test, build and
// per-item checks) for the harness. Gate commands are written by the user
// in the PRD or config, so they run through `sh -c` like a Makefile recipe;
// their output goes to the transcript and a bounded tail is kept as retry
// context for the next prompt.
package gate

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/proc"
)

// Gate is one named command.
type Gate struct {
	Name    string `json:"name"`
	Command string `json:"command"`
}

// Result of one gate.
type Result struct {
	Name     string        `json:"name"`
	Command  string        `json:"command"`
	Passed   bool          `json:"passed"`
	ExitCode int           `json:"exit_code"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Duration time.Duration `json:"duration"`
	Output   string        `json:"output,omitempty"` // tail, for retry context
}

// Runner runs gates in a work tree.
type Runner struct {
	Proc    proc.Runner
	Timeout time.Duration // per gate; 0 = 10 minutes
	Env     []string
}

// Run runs gates in order and stops at the first failure (later gates
// rarely say anything useful about a tree that does not typecheck).
func (r Runner) Run(ctx context.Context, dir string, gates []Gate, log io.Writer) ([]Result, bool) {
	if log == nil {
		log = io.Discard
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	var results []Result
	for _, g := range gates {
		fmt.Fprintf(log, "\n=== gate %s: %s\n", g.Name, g.Command)
		tail := &agent.TailBuffer{Max: 16 << 10}
		w := io.MultiWriter(log, tail)
		res, err := r.Proc.Run(ctx, proc.Cmd{
			Argv: []string{"sh", "-c", g.Command}, Dir: dir, Env: proc.Environ(nil, r.Env...),
			Stdin: strings.NewReader(""), Stdout: w, Stderr: w, Timeout: timeout,
		})
		gr := Result{Name: g.Name, Command: g.Command, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration}
		gr.Passed = err == nil && res.ExitCode == 0 && !res.TimedOut
		if !gr.Passed {
			gr.Output = tail.String()
			if res.TimedOut {
				gr.Output += fmt.Sprintf("\n[ralph] gate %s timed out after %s\n", g.Name, timeout)
			}
			if err != nil {
				gr.Output += "\n[ralph] " + err.Error() + "\n"
			}
		}
		fmt.Fprintf(log, "=== gate %s: %s (exit %d, %s)\n", g.Name, passWord(gr.Passed), gr.ExitCode, gr.Duration.Round(time.Millisecond))
		results = append(results, gr)
		if !gr.Passed {
			return results, false
		}
		if ctx.Err() != nil {
			return results, false
		}
	}
	return results, true
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}

// Summary is a one-line description of results.
func Summary(results []Result) string {
	if len(results) == 0 {
		return "no gates"
	}
	var parts []string
	for _, r := range results {
		parts = append(parts, r.Name+" "+passWord(r.Passed))
	}
	return strings.Join(parts, ", ")
}

// FailureContext renders the failing gate's output for the next prompt,
// trimmed to max bytes keeping the head and the tail (compiler errors come
// first, test summaries last).
func FailureContext(results []Result, max int) string {
	for _, r := range results {
		if r.Passed {
			continue
		}
		out := Trim(strings.TrimSpace(r.Output), max)
		return fmt.Sprintf("Gate `%s` (`%s`) failed with exit code %d:\n\n```\n%s\n```", r.Name, r.Command, r.ExitCode, out)
	}
	return ""
}

// Trim keeps the first and last parts of s within max bytes.
func Trim(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head := max / 3
	tail := max - head - 40
	return s[:head] + "\n… [" + fmt.Sprint(len(s)-head-tail) + " bytes trimmed] …\n" + s[len(s)-tail:]
}
