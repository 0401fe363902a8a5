package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/store"
)

// corruptStateError is a state.json that exists but cannot be read as a
// run's state (a disk error, an edit by hand, a truncation by some other
// tool: ralph itself only ever renames a whole file into place).
type corruptStateError struct {
	Path string
	Err  error
}

func (e *corruptStateError) Error() string {
	return fmt.Sprintf("%s is corrupt: %v", e.Path, e.Err)
}

func (e *corruptStateError) Unwrap() error { return e.Err }

// runFacts are what run_started and run_resumed events record about a
// run, so that its state can be rebuilt from the event log.
func runFacts(st *State) map[string]any {
	return map[string]any{
		"source": st.Source, "source_path": st.SourcePath, "branch": st.Branch,
		"base_branch": st.BaseBranch, "agent": st.Agent,
		"max_iterations": st.MaxIterations, "max_attempts": st.MaxAttempts,
		"started_at": st.StartedAt,
	}
}

// rebuildState reconstructs the state of the last run recorded in the
// event log at p.Events, for a state.json that is corrupt: the run's id
// and source, every item's status, attempts, runs and iterations, the
// usage so far and how the run stopped. What only state.json held (the
// iterations under way at the crash, the breaker's counts) starts afresh.
// The source reconciles the result with the repository when the run
// resumes, as it does any saved state: an item recorded as passed without
// its verified commit on the branch is not trusted. An error says why
// nothing could be rebuilt.
func rebuildState(p Paths) (*State, error) {
	var st *State
	err := store.ReadJSONL(p.Events, func(_ int, raw []byte) error {
		var ev Event
		if json.Unmarshal(raw, &ev) != nil {
			return nil // a line of some other shape: not the run's record
		}
		if ev.Type == "run_started" || (ev.Type == "run_resumed" && (st == nil || st.RunID != ev.RunID)) {
			if facts := factsOf(ev); facts != nil {
				st = facts
			}
			return nil
		}
		if st == nil || ev.RunID != st.RunID {
			return nil
		}
		apply(st, ev)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the event log: %w", err)
	}
	if st == nil {
		return nil, errors.New(p.Events + " records no run to rebuild it from")
	}
	// No iteration is under way in a rebuilt state (Current is what only
	// state.json held): an item the crash caught running is pending again.
	for _, is := range st.Items {
		if is.Status == ItemRunning {
			is.Status = ItemPending
		}
	}
	return st, nil
}

// factsOf is the state a run_started (or run_resumed) event describes;
// nil for an event of an older ralph that recorded no facts.
func factsOf(ev Event) *State {
	src, _ := ev.Data["source"].(string)
	path, _ := ev.Data["source_path"].(string)
	if ev.RunID == "" || src == "" || path == "" {
		return nil
	}
	str := func(k string) string { s, _ := ev.Data[k].(string); return s }
	num := func(k string) int { n, _ := ev.Data[k].(float64); return int(n) }
	started := ev.Time
	if t, err := time.Parse(time.RFC3339Nano, str("started_at")); err == nil {
		started = t
	}
	return &State{
		Version: 1, RunID: ev.RunID, Source: src, SourcePath: path,
		Branch: str("branch"), BaseBranch: str("base_branch"), Agent: str("agent"),
		Status: StatusInterrupted, StartedAt: started, UpdatedAt: ev.Time,
		MaxIterations: num("max_iterations"), MaxAttempts: num("max_attempts"),
		Items: map[string]*ItemState{},
	}
}

// apply replays one event of the run onto its rebuilt state. Items are
// listed in the order the log first names them (the source puts them in
// its own order, untouched ones included, when the run resumes).
func apply(st *State, ev Event) {
	if ev.Item != "" && st.Items[ev.Item] == nil {
		st.Order = append(st.Order, ev.Item)
		st.Item(ev.Item).Status = ItemPending
	}
	st.UpdatedAt = ev.Time
	if ev.Iteration > st.Iteration {
		st.Iteration = ev.Iteration
	}
	switch ev.Type {
	case "iteration_started":
		is := st.Item(ev.Item)
		is.Runs++
		if t, ok := ev.Data["title"].(string); ok {
			is.Title = t
		}
		is.Iterations = append(is.Iterations, ev.Iteration)
		if is.Status == ItemPending {
			is.Status = ItemRunning
		}
	case "agent_finished":
		if raw, ok := ev.Data["usage"]; ok {
			var u agent.Usage
			if b, err := json.Marshal(raw); err == nil && json.Unmarshal(b, &u) == nil {
				st.Usage.Add(u)
			}
		}
	case "item_failed":
		is := st.Item(ev.Item)
		is.Attempts = max(is.Attempts, ev.Attempt)
		is.Status, is.LastResult = ItemPending, ev.Message
	case "item_blocked":
		is := st.Item(ev.Item)
		is.Status, is.Reason = ItemBlocked, ev.Message
	case "item_retried":
		reopen(st.Item(ev.Item))
	case "item_passed":
		is := st.Item(ev.Item)
		is.Status, is.LastResult = ItemPassed, ev.Message
		is.Commit, _ = ev.Data["commit"].(string)
		t := ev.Time
		is.PassedAt = &t
	case "run_stopped":
		st.Status, st.StopReason = StatusInterrupted, ev.Message
		if s, ok := ev.Data["status"].(string); ok {
			st.Status = s
		}
		for _, is := range st.Items {
			if is.Status == ItemRunning {
				is.Status = ItemPending
			}
		}
	}
}

// loadOrRebuild reads state.json, or rebuilds a corrupt one from the
// event log (note says what happened, for the user). A corrupt file is
// never deleted: the caller that writes state moves it aside first.
func loadOrRebuild(p Paths) (st *State, note string, err error) {
	st, err = LoadState(p.State)
	var ce *corruptStateError
	if !errors.As(err, &ce) {
		return st, "", err
	}
	rebuilt, rerr := rebuildState(p)
	if rerr != nil {
		return nil, "", fmt.Errorf("%w; it cannot be rebuilt: %v", ce, rerr)
	}
	return rebuilt, fmt.Sprintf("%v; rebuilt run %s from %s and the repository", ce, rebuilt.RunID, p.Events), nil
}

// setAsideCorrupt keeps a corrupt state.json beside the new one, for a
// person to look at: state.json.corrupt-<time>.
func setAsideCorrupt(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, nil
}
