package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Blocked are the ids of the run's blocked items, in display order.
func (st *State) Blocked() []string {
	var out []string
	for _, id := range st.Order {
		if st.Items[id].Status == ItemBlocked {
			out = append(out, id)
		}
	}
	return out
}

// Retryable checks ids against the run: each must be one of its blocked
// items (all of them when ids is empty). It returns the ids to reopen.
func (st *State) Retryable(ids []string) ([]string, error) {
	blocked := st.Blocked()
	if len(ids) == 0 {
		if len(blocked) == 0 {
			return nil, usage.Errorf("run %s has no blocked item: nothing to retry", st.RunID)
		}
		return blocked, nil
	}
	which := "none is"
	if len(blocked) > 0 {
		which = "blocked: " + strings.Join(blocked, ", ")
	}
	var out []string
	for _, id := range ids {
		is, ok := st.Items[id]
		switch {
		case !ok:
			return nil, usage.Errorf("%s: no such item in run %s (%s)", id, st.RunID, which)
		case is.Status == ItemMarked:
			return nil, usage.Errorf("%s is %s, not blocked: %s; `ralph run --trust-marks` counts it as passed", id, MarkedLabel, verifyMarks(st.Source))
		case is.Status != ItemBlocked:
			return nil, usage.Errorf("%s is %s, not blocked: only a blocked item is retried (%s)", id, is.Status, which)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Reopen makes the blocked items ids pending again with their attempts
// and iterations reset (the last failure stays as the next prompt's
// retry context), and clears a blocked run's stop, so that the next
// `ralph run` resumes it. The caller holds the run lock; the event is
// appended first, then the state replaced atomically: a crash between
// the two leaves the state as it was, and an event log a rebuilt state
// reads the same way.
func Reopen(p Paths, st *State, ids []string, now time.Time) error {
	for _, id := range ids {
		ev := Event{Time: now.UTC(), RunID: st.RunID, Type: "item_retried", Item: id,
			Message: fmt.Sprintf("%s reopened by `ralph retry` (was: %s)", id, st.Items[id].Reason)}
		if err := store.AppendJSONL(p.Events, ev); err != nil {
			return err
		}
		reopen(st.Items[id])
	}
	if st.Status == StatusBlocked {
		st.Status, st.StopReason = StatusStopped, "blocked items reopened by `ralph retry`; `ralph run` continues"
	}
	st.UpdatedAt = now.UTC()
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return store.WriteFile(p.State, append(data, '\n'), 0o600)
}

// reopen is one item's side of Reopen (and of its event, when a state is
// rebuilt from the log).
func reopen(is *ItemState) {
	is.Status, is.Reason = ItemPending, ""
	is.Attempts, is.Runs, is.Failures, is.InProgress = 0, 0, 0, 0
	is.Fix, is.Fixes = "", 0
}
