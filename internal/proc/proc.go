// Package proc runs child processes from argv lists. Every child gets its own
// process group so that a timeout or cancel kills the whole tree (an agent's
// `sleep` grandchild included), and nothing here ever goes through a shell
// built from data.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cmd describes one child process.
type Cmd struct {
	Argv    []string
	Dir     string
	Env     []string // full environment; nil means inherit os.Environ()
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Timeout time.Duration // 0 = none beyond ctx
	// SocketOutput gives the command a socket, not a pipe, for its
	// output (on Linux): a process cannot open a socket again through
	// /proc/PID/fd (the kernel answers ENXIO), so what a command starts
	// (test code under a test runner) cannot write into the output of the
	// process that started it (the runner's report, which ralph reads);
	// it can only write to its own output, which that process reads.
	SocketOutput bool
	// Started is told the child's pid (= its process group id) as soon as
	// it runs, so a supervisor can record it before anything else happens.
	Started func(pid int)
}

// String renders the argv for logs and errors, quoting where needed.
func (c Cmd) String() string { return QuoteArgv(c.Argv) }

// Result is what a finished child left behind.
type Result struct {
	ExitCode int
	TimedOut bool
	Duration time.Duration
}

// Runner runs commands. The real one is Exec; tests of a single package use
// FakeRunner.
type Runner interface {
	Run(ctx context.Context, c Cmd) (Result, error)
}

// ErrNotFound wraps a missing executable so callers can print install hints.
var ErrNotFound = errors.New("executable not found")

// Exec is the real Runner.
type Exec struct {
	// Grace is how long a group gets between SIGTERM and SIGKILL.
	Grace time.Duration
}

// Run starts c and waits for it. A non-zero exit is not an error: it is in
// Result.ExitCode. Errors are for "could not run at all" and for ctx ending.
func (e Exec) Run(ctx context.Context, c Cmd) (Result, error) {
	if len(c.Argv) == 0 {
		return Result{}, errors.New("proc: empty argv")
	}
	path, err := exec.LookPath(c.Argv[0])
	if err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("%w: %s", ErrNotFound, c.Argv[0])
	}
	env := c.Env
	if tags := tagsOf(ctx); len(tags) > 0 {
		// The iteration's mark (WithTag), inherited by all it starts.
		env = Environ(env, tags...)
	}
	if c.Dir != "" {
		// Tools that trust $PWD (opencode does) must see the child's own
		// directory, not the one ralph was started in.
		if abs, err := filepath.Abs(c.Dir); err == nil {
			env = Environ(env, "PWD="+abs)
		}
	}
	if cf := ConfinerOf(ctx); cf != nil {
		inner := c
		inner.Argv = append([]string{path}, c.Argv[1:]...)
		inner.Env = env
		confined, done, err := cf.Confine(inner)
		if err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("proc: confine %s: %w", c.Argv[0], err)
		}
		defer done()
		if path, err = exec.LookPath(confined.Argv[0]); err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("%w: %s", ErrNotFound, confined.Argv[0])
		}
		c.Argv, env = confined.Argv, confined.Env
	}
	cmd := exec.Command(path, c.Argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	cmd.Stderr = c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.SocketOutput {
		drain := socketOutputs(cmd, c.Stdout, c.Stderr)
		defer drain()
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("proc: start %s: %w", c.Argv[0], err)
	}
	pgid := cmd.Process.Pid
	if c.Started != nil {
		c.Started(pgid)
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timer <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timer = t.C
	}
	grace := e.Grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	var res Result
	var waitErr error
	var ctxErr error
	select {
	case waitErr = <-done:
	case <-timer:
		res.TimedOut = true
		waitErr = killGroup(pgid, done, grace)
	case <-ctx.Done():
		ctxErr = ctx.Err()
		waitErr = killGroup(pgid, done, grace)
	}
	// The leader may be gone while children of the group still live (an
	// agent that backgrounds a process); never leave them behind.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	res.Duration = time.Since(start)
	res.ExitCode = ExitCode(waitErr)
	if ctxErr != nil {
		return res, ctxErr
	}
	return res, nil
}

func killGroup(pgid int, done <-chan error, grace time.Duration) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}

// ExitCode is the exit status a finished command's error stands for: 0
// for none, 128+N for a process killed by signal N, -1 when the command
// did not run to an exit at all.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// Output runs c capturing stdout and stderr (for small outputs such as git
// plumbing). A non-zero exit becomes an *ExitError carrying stderr.
func Output(ctx context.Context, r Runner, c Cmd) (string, error) {
	var out, errb strings.Builder
	c.Stdout = &out
	c.Stderr = &errb
	res, err := r.Run(ctx, c)
	if err != nil {
		return out.String(), err
	}
	if res.ExitCode != 0 {
		return out.String(), &ExitError{Cmd: c.String(), Code: res.ExitCode, Stderr: strings.TrimSpace(errb.String()), Stdout: out.String()}
	}
	return out.String(), nil
}

// ExitError is a command that ran and failed.
type ExitError struct {
	Cmd    string
	Code   int
	Stderr string
	Stdout string
}

func (e *ExitError) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = strings.TrimSpace(e.Stdout)
	}
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	return fmt.Sprintf("%s: exit %d: %s", e.Cmd, e.Code, msg)
}

// QuoteArgv renders argv the way a shell user would type it.
func QuoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = Quote(a)
	}
	return strings.Join(parts, " ")
}

// Quote single-quotes s when it holds anything a shell would interpret.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Environ returns os.Environ() with extra KEY=VALUE pairs applied on top
// (later pairs win), so a child sees one value per key.
func Environ(base []string, extra ...string) []string {
	if base == nil {
		base = os.Environ()
	}
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range append(append([]string{}, base...), extra...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// KillGroupIf kills process group pgid if its leader's environment holds
// marker (KEY=VALUE). A supervisor that died with kill -9 leaves its
// children's group running; the marker guards against a reused pid.
func KillGroupIf(pgid int, marker string) bool {
	if pgid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pgid))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv == marker {
			return syscall.Kill(-pgid, syscall.SIGKILL) == nil
		}
	}
	return false
}

// Alive reports whether process pid still runs. A zombie counts as gone: it
// is dead and holds nothing, it only waits to be reaped — and under a
// container's PID 1 that never reaps, orphans stay zombies for good, so
// kill(pid, 0) alone would call them alive.
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs: trust kill(0)
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses; the last ')' ends it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	switch s[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// Openers tells, for each of paths, which processes have it open, by
// reading every process's /proc/<pid>/fd links. ok is false where there is
// no /proc to read (nothing can be told then).
func Openers(paths []string) (map[string][]int, bool) {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	out := map[string][]int{}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			if target, err := os.Readlink(dir + "/" + fd.Name()); err == nil && want[target] {
				out[target] = append(out[target], pid)
			}
		}
	}
	return out, true
}

// Running reports whether a live process's argv matches. ok is false where
// there is no /proc to read (nothing can be told then).
func Running(match func(argv []string) bool) (running, ok bool) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	self := os.Getpid()
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) == 0 {
			continue // gone, not ours to read, or a kernel thread
		}
		if match(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")) && Alive(pid) {
			return true, true
		}
	}
	return false, true
}

// SameWriter reports whether a and b are one writer (a value that cannot
// be compared is not, as os/exec has it).
func SameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}
