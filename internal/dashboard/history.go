package dashboard

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
)

// Outcomes of an iteration, as the timeline colours them.
const (
	OutcomeRunning     = "running"
	OutcomePassed      = "passed"
	OutcomeFailed      = "failed"
	OutcomeBlocked     = "blocked" // failed, and the item is blocked
	OutcomeProgress    = "progress"
	OutcomeRateLimited = "rate_limited"
	OutcomeWaiting     = "waiting" // for a person's answer
	OutcomePlan        = "plan"
	OutcomeInterrupted = "interrupted"
	OutcomeDone        = "done" // ended without a verdict of its own
)

// QuestionAsked and QuestionAnswered are the events of an agent's
// question to a person (`ralph ask`, `ralph answer`): the iteration waits
// between them.
const (
	QuestionAsked    = "question_asked"
	QuestionAnswered = "question_answered"
)

// Iteration is one iteration of the run as its events tell it.
type Iteration struct {
	Number  int    `json:"iteration"`
	Item    string `json:"item"`
	Title   string `json:"title,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Role    string `json:"role"`
	Agent   string `json:"agent,omitempty"`
	// Worker is the remote worker that ran the agent in a coordinator's
	// run ("W on HOST"), "" for this machine.
	Worker string    `json:"worker,omitempty"`
	Start  time.Time `json:"start"`
	// AgentEnd is when the agent finished; GateStart and GateEnd bound
	// the gates' time inside the iteration.
	AgentEnd  time.Time `json:"agent_end,omitzero"`
	GateStart time.Time `json:"gate_start,omitzero"`
	GateEnd   time.Time `json:"gate_end,omitzero"`
	// SlotEnd is when the iteration gave its worker slot back: a story
	// verified in a tree of its own waits in the merge queue without one.
	SlotEnd time.Time   `json:"slot_end,omitzero"`
	End     time.Time   `json:"end,omitzero"`
	Outcome string      `json:"outcome"`
	Summary string      `json:"summary,omitempty"`
	Gates   []Gate      `json:"gates,omitempty"`
	Usage   agent.Usage `json:"usage"`
	// WaitUntil is the end of the rate limit the iteration hit; Asked and
	// Answered bound a wait for a person's answer.
	WaitUntil  time.Time `json:"wait_until,omitzero"`
	Asked      time.Time `json:"asked,omitzero"`
	Answered   time.Time `json:"answered,omitzero"`
	Queued     bool      `json:"merge_queued,omitempty"`
	Transcript string    `json:"-"`
	Events     []Line    `json:"-"`
	scanned    bool      // its transcript was read for the worker
}

// Gate is one gate's result in an iteration.
type Gate struct {
	Name       string `json:"name"`
	Passed     bool   `json:"passed"`
	DurationMS int64  `json:"duration_ms"`
}

// Line is one event of an iteration, for people.
type Line struct {
	Time    time.Time
	Type    string
	Message string
}

// Duration is the iteration's time from its start to its end (to now
// while it runs).
func (it *Iteration) Duration(now time.Time) time.Duration {
	end := it.End
	if end.IsZero() {
		end = now
	}
	return end.Sub(it.Start)
}

// Wait is a time the whole run waited: a rate limit.
type Wait struct {
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
	Why   string    `json:"why"`
}

// Pass is an item passing.
type Pass struct {
	Item string    `json:"item"`
	Time time.Time `json:"time"`
}

// History is the run's iterations, passes and waits, read from its
// events in order (Feed keeps one up to date).
type History struct {
	Start      time.Time
	Iterations []Iteration
	Passes     []Pass
	Waits      []Wait
	Last       time.Time // the newest event
	byNumber   map[int]int
}

// add reads one event into the history.
func (h *History) add(ev engine.Event) {
	if ev.Time.After(h.Last) {
		h.Last = ev.Time
	}
	switch ev.Type {
	case "run_started", "run_resumed":
		if h.Start.IsZero() || ev.Type == "run_started" {
			h.Start = ev.Time
		}
		h.interrupt(false)
		return
	case "rate_limited":
		if ev.Iteration == 0 {
			if until := timeOf(ev.Data["until"]); !until.IsZero() {
				h.Waits = append(h.Waits, Wait{From: ev.Time, Until: until, Why: ev.Message})
			}
			return
		}
	case "item_passed":
		h.Passes = append(h.Passes, Pass{Item: ev.Item, Time: ev.Time})
	}
	if ev.Iteration == 0 {
		return
	}
	if h.byNumber == nil {
		h.byNumber = map[int]int{}
	}
	i, ok := h.byNumber[ev.Iteration]
	if ev.Type == "iteration_started" {
		if ok && h.Iterations[i].End.IsZero() {
			h.end(&h.Iterations[i], OutcomeInterrupted, h.Iterations[i].last(), "")
		}
		it := Iteration{Number: ev.Iteration, Item: ev.Item, Attempt: ev.Attempt, Start: ev.Time, Outcome: OutcomeRunning, Role: "worker"}
		it.Title, _ = ev.Data["title"].(string)
		it.Agent, _ = ev.Data["agent"].(string)
		it.Transcript, _ = ev.Data["transcript"].(string)
		if r, _ := ev.Data["role"].(string); r != "" {
			it.Role = r
		}
		h.byNumber[ev.Iteration] = len(h.Iterations)
		h.Iterations = append(h.Iterations, it)
		i, ok = len(h.Iterations)-1, true
	}
	if !ok {
		return // an event of an iteration the log no longer starts
	}
	if ev.Type == "recovered" && h.Iterations[i].Outcome == OutcomeInterrupted {
		// The resumed run finishes the iteration a crash cut off: the
		// rest of it is a bar of its own.
		again := h.Iterations[i]
		again.Start, again.End, again.SlotEnd, again.Outcome, again.Events = ev.Time, time.Time{}, time.Time{}, OutcomeRunning, nil
		again.AgentEnd, again.GateStart, again.GateEnd, again.Gates, again.Usage = time.Time{}, time.Time{}, time.Time{}, nil, agent.Usage{}
		h.byNumber[ev.Iteration] = len(h.Iterations)
		h.Iterations = append(h.Iterations, again)
		i = len(h.Iterations) - 1
	}
	it := &h.Iterations[i]
	it.Events = append(it.Events, Line{Time: ev.Time, Type: ev.Type, Message: ev.Message})
	switch ev.Type {
	case "agent_finished":
		it.AgentEnd = ev.Time
		if u, ok := ev.Data["usage"]; ok {
			var usage agent.Usage
			if b, err := json.Marshal(u); err == nil && json.Unmarshal(b, &usage) == nil {
				it.Usage.Add(usage)
			}
		}
	case "gate_result":
		name, _ := ev.Data["gate"].(string)
		passed, _ := ev.Data["passed"].(bool)
		it.Gates = append(it.Gates, Gate{Name: name, Passed: passed, DurationMS: int64(num(ev.Data["duration_ms"]))})
		it.GateEnd = ev.Time
		var total int64
		for _, g := range it.Gates {
			total += g.DurationMS
		}
		it.GateStart = ev.Time.Add(-time.Duration(total) * time.Millisecond)
		if from := it.AgentEnd; !from.IsZero() && it.GateStart.Before(from) {
			it.GateStart = from
		}
	case "merge_queued":
		it.Queued = true
		if it.SlotEnd.IsZero() {
			it.SlotEnd = ev.Time
		}
	case "item_passed":
		h.end(it, OutcomePassed, ev.Time, ev.Message)
	case "item_failed":
		h.end(it, OutcomeFailed, ev.Time, ev.Message)
	case "item_blocked":
		h.end(it, OutcomeBlocked, ev.Time, ev.Message)
	case "item_progress":
		h.end(it, OutcomeProgress, ev.Time, ev.Message)
	case "plan_written":
		h.end(it, OutcomePlan, ev.Time, ev.Message)
	case "rate_limited":
		it.WaitUntil = timeOf(ev.Data["until"])
		h.end(it, OutcomeRateLimited, ev.Time, ev.Message)
		if !it.WaitUntil.IsZero() {
			h.Waits = append(h.Waits, Wait{From: ev.Time, Until: it.WaitUntil, Why: ev.Message})
		}
	case QuestionAsked:
		it.Asked, it.Outcome = ev.Time, OutcomeWaiting
	case QuestionAnswered:
		it.Answered = ev.Time
		if it.Outcome == OutcomeWaiting {
			it.Outcome = OutcomeRunning
		}
	}
}

// end closes the iteration with its outcome. A failure followed by the
// item's block stays one iteration, now blocked.
func (h *History) end(it *Iteration, outcome string, at time.Time, summary string) {
	if !it.End.IsZero() && !(outcome == OutcomeBlocked && it.Outcome == OutcomeFailed) {
		return
	}
	it.Outcome, it.End = outcome, at
	if summary != "" && (it.Summary == "" || outcome != OutcomeBlocked) {
		it.Summary = summary
	}
	if it.SlotEnd.IsZero() {
		it.SlotEnd = at
	}
}

// interrupt ends the iterations still open: a new start of the run
// means their process is gone. waiting keeps those that wait for a
// person's answer open.
func (h *History) interrupt(waiting bool) {
	for i := range h.Iterations {
		if it := &h.Iterations[i]; it.End.IsZero() && !(waiting && it.Outcome == OutcomeWaiting) {
			h.end(it, OutcomeInterrupted, it.last(), "")
		}
	}
}

// last is the time of the iteration's newest event.
func (it *Iteration) last() time.Time {
	if n := len(it.Events); n > 0 {
		return it.Events[n-1].Time
	}
	return it.Start
}

// copy is a snapshot of the history for a reader (the feed goes on
// appending to its own).
func (h *History) copy() *History {
	c := *h
	c.Iterations = append([]Iteration(nil), h.Iterations...)
	c.Passes = append([]Pass(nil), h.Passes...)
	c.Waits = append([]Wait(nil), h.Waits...)
	c.byNumber = nil
	return &c
}

// findWorkers reads, for up to max finished iterations that do not name
// their worker yet, the head of their transcript: a coordinator's
// remote agent names the worker that took the job before any output.
func (h *History) findWorkers(max int) {
	for i := range h.Iterations {
		it := &h.Iterations[i]
		if max == 0 {
			return
		}
		if it.scanned || it.Worker != "" || it.End.IsZero() || it.Transcript == "" {
			continue
		}
		it.scanned = true
		max--
		it.Worker = workerOf(it.Transcript)
	}
}

// workerOf is the worker a transcript names at the start of the agent's
// output, or "": it stops at the first line of the agent's own.
func workerOf(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	output := false
	for sc.Scan() {
		l := sc.Text()
		if !output {
			output = l == "## Agent output"
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		if w, host, ok := cluster.WorkerOfLine(l); ok {
			return w + " on " + host
		}
		if !strings.HasPrefix(l, "[ralph] ") {
			return ""
		}
	}
	return ""
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func timeOf(v any) time.Time {
	s, _ := v.(string)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
