// Package gate runs quality gates (typecheck, lint, test, build and
// per-item checks) for the harness. Gate commands are written by the user
// in the PRD or config, so they run through `sh -c` like a Makefile recipe
// (a plain "program arg…" line starts the program itself: see Argv); their
// output goes to the transcript and a bounded tail is kept as retry
// context for the next prompt.
package gate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
)

// Gate is one named command.
type Gate struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	// Report, when set, is where the command writes a JUnit XML report
	// (pytest --junitxml, jest-junit, vitest --reporter=junit): a
	// filepath.Match pattern relative to the work tree. It names the
	// gate's tests (Result.Tests).
	Report string `json:"report,omitempty"`
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
	// Tests are the tests the gate reported running (nil when its output
	// and report said nothing about tests).
	Tests *Tests `json:"tests,omitempty"`
}

// Runner runs gates in a work tree.
type Runner struct {
	Proc    proc.Runner
	Timeout time.Duration // per gate; 0 = 10 minutes
	Env     []string
}

// Run runs gates in order and stops at the first failure (later gates
// rarely say anything useful about a tree that does not typecheck).
// Each result carries the tests its gate reported (Result.Tests); a gate
// that is one `go test` command runs with -json so that every test is
// named, and its log shows what go test would have printed.
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
		command, verbose, rendered := goTestJSON(g.Command)
		if !rendered {
			command = g.Command
		}
		w := newOutputReader(io.MultiWriter(log, tail), rendered, verbose)
		// $RALPH_GATE names the gate to its command, and to the sandbox
		// (its network is chosen by name).
		env := proc.Environ(nil, append(append([]string{}, r.Env...), sandbox.GateEnv+"="+g.Name)...)
		start := time.Now()
		// SocketOutput: test code cannot write forged results into the
		// output of the runner that started it (proc.Cmd).
		res, err := r.Proc.Run(ctx, proc.Cmd{
			Argv: argv(command, env), Dir: dir, Env: env,
			Stdin: strings.NewReader(""), Stdout: w, Stderr: w, Timeout: timeout, SocketOutput: true,
		})
		w.finish()
		var junit *Tests
		if g.Report != "" {
			var notes []string
			junit, notes = readReports(dir, g.Report, start)
			for _, n := range notes {
				fmt.Fprintf(w.out, "[ralph] %s\n", n)
			}
		}
		gr := Result{Name: g.Name, Command: g.Command, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration, Tests: w.tests(junit)}
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
		counts := ""
		if gr.Tests != nil {
			counts = ", tests: " + gr.Tests.String()
		}
		fmt.Fprintf(log, "=== gate %s: %s (exit %d, %s%s)\n", g.Name, PassWord(gr.Passed), gr.ExitCode, gr.Duration.Round(time.Millisecond), counts)
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

// argv is how a gate command runs: `sh -c command`, or — when the command
// is only plain words (no quoting, expansion, redirection, operator or
// variable assignment) and its program is found on env's PATH — the
// program itself, which is what the shell would have run, one process
// fewer per gate. Words the shell would treat differently from the
// program of the same name (echo, printf, test, …) keep the shell.
func argv(command string, env []string) []string {
	shell := []string{"sh", "-c", command}
	words := strings.Fields(command)
	if len(words) == 0 || shellOnly[words[0]] || strings.ContainsAny(words[0], "=/") {
		return shell
	}
	for _, r := range command {
		if !plainRune(r) {
			return shell
		}
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			return shell // relative to the gate's folder, which LookPath would not see
		}
		p := filepath.Join(d, words[0])
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return append([]string{p}, words[1:]...)
		}
	}
	return shell
}

// shellOnly are builtins whose program namesake behaves differently, or
// that only make sense inside the shell.
var shellOnly = map[string]bool{"echo": true, "printf": true, "test": true, "kill": true, "pwd": true, "time": true,
	"cd": true, "exec": true, "exit": true, "command": true, "type": true, "set": true, "export": true, "ulimit": true, "umask": true}

func plainRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune(" \t_-.,:/=+@%", r)
}

// PassWord is how a gate result is written: "passed" or "FAILED".
func PassWord(ok bool) string {
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
		part := r.Name + " " + PassWord(r.Passed)
		if failed := r.FailedTests(); !r.Passed && len(failed) > 0 {
			// Which tests, so a reader of the one line knows where.
			more := ""
			if len(failed) > 3 {
				failed, more = failed[:3], fmt.Sprintf(" and %d more", len(failed)-3)
			}
			part += " (" + strings.Join(failed, ", ") + more + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// FailedTests are the tests the gate's inventory names as failed,
// sorted (none without a per-test inventory).
func (r Result) FailedTests() []string {
	if r.Tests == nil || !r.Tests.PerTest {
		return nil
	}
	var failed []string
	for name, o := range r.Tests.Names {
		if o == Fail {
			failed = append(failed, name)
		}
	}
	slices.Sort(failed)
	return failed
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
