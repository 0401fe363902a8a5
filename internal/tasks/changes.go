package tasks

import (
	"fmt"
	"slices"
)

// ValidateChanges checks what changed between two loads of the same files
// (before and after an agent's iteration) and returns a *ValidationError
// naming every change the loop should reject:
//
//   - a new task reusing the id of an archived task;
//   - a new task under a parent that is already complete;
//   - a new task that starts as "active" (only the loop claims tasks);
//   - a task deleted from tasks.jsonl without being completed;
//   - an archived task removed or rewritten (the archive is append-only).
//
// Structural problems (bad JSON, duplicates, missing parents, …) are
// already reported by the Load that produced after.
func ValidateChanges(before, after *Set) error {
	var probs []Problem
	add := func(file string, t *Task, format string, args ...any) {
		probs = append(probs, Problem{File: file, Line: t.line, ID: t.ID, Msg: fmt.Sprintf(format, args...)})
	}
	had := map[string]*Task{} // the lines of tasks.jsonl before
	for _, t := range slices.Concat(before.active, before.shadowed) {
		had[t.ID] = t
	}
	now := map[string]bool{}
	// Lines with the id of an archived task are "shadowed" by Load; the
	// agent may have added them.
	added := slices.Concat(after.active, after.shadowed)
	slices.SortStableFunc(added, func(a, b *Task) int { return a.line - b.line })
	for _, t := range added {
		now[t.ID] = true
		if h := had[t.ID]; h != nil {
			// What judges a task is a person's to loosen, never the agent's.
			if h.critical && !t.critical {
				add(after.activeName, t, `"critical" was removed; only a person changes how a task is judged`)
			}
			if !h.allowTestChanges && t.allowTestChanges {
				add(after.activeName, t, `"allow_test_changes" was set; only a person lets a task lose tests`)
			}
			continue
		}
		if t.allowTestChanges {
			add(after.activeName, t, `a new task cannot set "allow_test_changes"; only a person lets a task lose tests`)
		}
		if before.archived[t.ID] != nil {
			add(after.activeName, t, "id %s is already used by a completed task (in %s); pick a new id", t.ID, after.doneName)
			continue
		}
		if pid := t.Parent(); pid != "" && had[pid] == nil && before.archived[pid] != nil {
			add(after.activeName, t, "parent %s is already complete; add the task somewhere else", pid)
		}
		if t.Status == StatusActive {
			add(after.activeName, t, `a new task must start as "pending" (the loop claims tasks)`)
		}
	}
	for _, t := range before.active {
		if !now[t.ID] && after.archived[t.ID] == nil {
			probs = append(probs, Problem{File: after.activeName, ID: t.ID,
				Msg: fmt.Sprintf("was deleted without being completed (it was on line %d); mark it complete or blocked instead", t.line)})
		}
	}
	// The archive is append-only.
	for _, t := range before.archivedOnce() {
		switch a := after.archived[t.ID]; {
		case a == nil:
			probs = append(probs, Problem{File: after.doneName, ID: t.ID,
				Msg: fmt.Sprintf("was removed from the archive, which is append-only (it was on line %d)", t.line)})
		case string(a.raw) != string(t.raw):
			add(after.doneName, a, "was changed in the archive, which is append-only")
		}
	}
	if len(probs) > 0 {
		return &ValidationError{probs}
	}
	return nil
}
