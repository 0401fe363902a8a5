package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/usage"
)

// defaultHeartbeat is how long an agent runs before the plain output
// says it still does (and again after each such interval).
const defaultHeartbeat = 30 * time.Second

// plainPrinter is `ralph run`'s output when nothing else is asked: one
// timestamped line per event (colour on a terminal only), and while an
// agent runs longer than the heartbeat, a line with its elapsed time.
type plainPrinter struct {
	w     io.Writer
	color bool
	now   func() time.Time

	mu      sync.Mutex
	running map[string]agentRun // by item
}

type agentRun struct {
	iteration int
	started   time.Time
}

func newPlainPrinter(w io.Writer, color bool) *plainPrinter {
	return &plainPrinter{w: w, color: color, now: time.Now, running: map[string]agentRun{}}
}

// ANSI colours of the event types a person looks for.
var eventColor = map[string]string{
	"item_passed": "32", "item_failed": "31", "tamper_detected": "31;1", "item_blocked": "33",
	"merge_conflict": "33", "rate_limited": "33", "run_stopped": "1", "source_error": "31",
}

func (p *plainPrinter) paint(typ, s string) string {
	if c := eventColor[typ]; p.color && c != "" {
		return "\x1b[" + c + "m" + s + "\x1b[0m"
	}
	return s
}

// event prints ev and keeps track of the agents running.
func (p *plainPrinter) event(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := ev.Time
	if t.IsZero() {
		t = p.now()
	}
	stamp := t.Local().Format("15:04:05")
	switch ev.Type {
	case "iteration_started":
		p.running[ev.Item] = agentRun{iteration: ev.Iteration, started: p.now()}
	case "agent_finished", "item_passed", "item_failed", "item_blocked", "rate_limited":
		delete(p.running, ev.Item)
	case "run_stopped":
		clear(p.running)
	}
	switch ev.Type {
	case "gate_result", "agent_finished":
		fmt.Fprintf(p.w, "%s   %s\n", stamp, p.paint(ev.Type, ev.Message))
	case "iteration_started":
		fmt.Fprintf(p.w, "%s ralph: %s\n", stamp, ev.Message)
		if tr, ok := ev.Data["transcript"].(string); ok {
			fmt.Fprintf(p.w, "           transcript %s\n", tr)
		}
	default:
		fmt.Fprintf(p.w, "%s ralph: %s\n", stamp, p.paint(ev.Type, ev.Message))
	}
}

// beat prints a line for each agent that has run longer than every
// since it started (or since its last line).
func (p *plainPrinter) beat(every time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	items := make([]string, 0, len(p.running))
	for id := range p.running {
		items = append(items, id)
	}
	sort.Strings(items)
	for _, id := range items {
		r := p.running[id]
		if el := now.Sub(r.started); el >= every {
			fmt.Fprintf(p.w, "%s ralph: %s · iteration %d · the agent has been running %s\n", now.Local().Format("15:04:05"), id, r.iteration, el.Round(time.Second))
		}
	}
}

// heartbeat beats every interval until ctx ends.
func (p *plainPrinter) heartbeat(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.beat(every)
		}
	}
}

// heartbeatInterval is DefaultHeartbeat, or $RALPH_HEARTBEAT (a duration).
func heartbeatInterval() (time.Duration, error) {
	v := os.Getenv("RALPH_HEARTBEAT")
	if v == "" {
		return defaultHeartbeat, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usage.Errorf("RALPH_HEARTBEAT=%q: want a positive duration such as 30s", v)
	}
	return d, nil
}
