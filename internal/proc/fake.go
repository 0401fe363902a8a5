package proc

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// TB is the part of testing.TB the fake needs (kept small so this file does
// not import testing into production binaries).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Cleanup(func())
}

// Expectation is one command the code under test must run, in order.
type Expectation struct {
	Argv   []string // exact match
	Stdout string
	Stderr string
	Exit   int
	Err    error
	Check  func(Cmd) // optional extra assertions (dir, env, stdin)
}

// FakeRunner replays expectations in order. It fails the test on a command
// nobody expected and, at cleanup, on expected commands that never ran.
type FakeRunner struct {
	t    TB
	mu   sync.Mutex
	want []Expectation
	ran  int
}

// NewFakeRunner registers the end-of-test check with t.
func NewFakeRunner(t TB, want ...Expectation) *FakeRunner {
	f := &FakeRunner{t: t, want: want}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, w := range f.want[f.ran:] {
			t.Errorf("proc.FakeRunner: expected command never ran: %s", QuoteArgv(w.Argv))
		}
	})
	return f
}

// Expect appends more expectations.
func (f *FakeRunner) Expect(e ...Expectation) {
	f.mu.Lock()
	f.want = append(f.want, e...)
	f.mu.Unlock()
}

func (f *FakeRunner) Run(ctx context.Context, c Cmd) (Result, error) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ran >= len(f.want) {
		f.t.Errorf("proc.FakeRunner: unexpected command: %s", c)
		return Result{ExitCode: 127}, fmt.Errorf("unexpected command %s", c)
	}
	w := f.want[f.ran]
	if strings.Join(w.Argv, "\x00") != strings.Join(c.Argv, "\x00") {
		f.t.Errorf("proc.FakeRunner: command %d: got %s, want %s", f.ran+1, c, QuoteArgv(w.Argv))
		return Result{ExitCode: 127}, fmt.Errorf("unexpected command %s", c)
	}
	f.ran++
	if w.Check != nil {
		w.Check(c)
	}
	if c.Stdout != nil {
		_, _ = io.WriteString(c.Stdout, w.Stdout)
	}
	if c.Stderr != nil {
		_, _ = io.WriteString(c.Stderr, w.Stderr)
	}
	return Result{ExitCode: w.Exit}, w.Err
}
