package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
)

// LoopLogFile is the plain loop's log at the repository root, as the
// minimal ralph.sh of Ralph Loop v2 keeps it: a line per iteration with
// its time, the agent's exit code, the run's end. `tail -f ralph.log`
// follows a run.
const LoopLogFile = "ralph.log"

// DefaultErrorWait is how long the plain loop waits after an agent's
// non-zero exit before the next iteration (ralph.sh's `sleep 10`).
const DefaultErrorWait = 10 * time.Second

// loopLog appends the plain loop's lines to ralph.log. A line is one
// write to a file opened for appending, so a reader never sees half of
// one; nothing in the log is state (the state is .ralph/state.json).
type loopLog struct {
	path string
	now  func() time.Time
	mu   sync.Mutex
}

func (l *loopLog) line(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintf(f, format+"\n", args...)
}

func (l *loopLog) clock() string { return l.now().Local().Format("15:04:05") }

// end writes how the run ended: ralph.sh's "Stopped." and "Max
// iterations reached.", and the reason of any other end.
func (l *loopLog) end(o engine.Outcome) {
	switch o.Status {
	case engine.StatusStopped:
		l.line("Stopped. (%s, %s)", o.Reason, l.clock())
	case engine.StatusMaxIterations:
		l.line("Max iterations reached. (%s)", l.clock())
	case "":
	default:
		l.line("Ended: %s: %s (%s)", o.Status, o.Reason, l.clock())
	}
}

// pacedAgent is the plain loop's agent: each run is logged in ralph.log
// with its iteration and time, then its exit code; after a non-zero exit
// (a timeout or a failure to start included) it waits `wait` before it
// returns, so the next iteration starts that much later, as ralph.sh's
// `sleep 10; continue`. A rate limit is not an exit to wait on here: the
// engine waits for its reset. Ctrl-C ends the wait at once.
type pacedAgent struct {
	agent.Agent
	log  *loopLog
	wait time.Duration
}

func (p *pacedAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	p.log.line("=== Iteration %d (%s) ===", req.Iteration, p.log.clock())
	res, err := p.Agent.Run(ctx, req)
	if ctx.Err() != nil {
		p.log.line("Interrupted. (%s)", p.log.clock())
		return res, err
	}
	code := res.ExitCode
	if err != nil && code == 0 {
		code = -1
	}
	if code == 0 && !res.TimedOut {
		p.log.line("Exit code 0 (%s)", p.log.clock())
		return res, err
	}
	what := fmt.Sprintf("Exit code %d", code)
	if res.TimedOut {
		what += " (timed out)"
	}
	if res.RateLimit != nil || p.wait <= 0 {
		p.log.line("%s (%s)", what, p.log.clock())
		return res, err
	}
	p.log.line("%s, waiting %s... (%s)", what, p.wait, p.log.clock())
	t := time.NewTimer(p.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return res, err
}

// paceLoop makes cfg's agent the plain loop's paced agent, writing
// ralph.log at the repository root (listed in .git/info/exclude: the log
// is never a commit's).
func (r *Run) paceLoop(ctx context.Context) error {
	root := r.cfg.Paths.Root
	if err := r.repo.EnsureExcluded(ctx, "/"+LoopLogFile); err != nil {
		return fmt.Errorf("listing %s in .git/info/exclude: %w", LoopLogFile, err)
	}
	log, wait := &loopLog{path: filepath.Join(root, LoopLogFile), now: time.Now}, r.o.ErrorWait
	r.loopLog = log
	a := &r.cfg.Agent
	a.Default = &pacedAgent{Agent: a.Default, log: log, wait: wait}
	if choose := a.For; choose != nil {
		a.For = func(it *engine.Item, role string) (engine.AgentChoice, error) {
			c, err := choose(it, role)
			if err == nil && c.Agent != nil {
				c.Agent = &pacedAgent{Agent: c.Agent, log: log, wait: wait}
			}
			return c, err
		}
	}
	return nil
}
