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
		probs = append(probs, Problem{File: file, Line: int(t.line), ID: t.ID, Msg: fmt.Sprintf(format, args...)})
	}
	wasShadowed := make(map[string]bool, len(before.shadowed))
	for _, e := range before.shadowed {
		wasShadowed[before.id(&e)] = true
	}
	// Both active lists are in id order and nearly the same: walk them
	// side by side, one string comparison per task, to find the tasks
	// added and the tasks gone (a tree of 100,000 tasks is checked after
	// every iteration).
	// When after was made from before by parsing only the lines that
	// changed (see reparse), only those records can differ.
	var added []*entry
	var gone []*entry
	bs, as := before.active, after.active
	if after.from != 0 && after.from == before.gen {
		bs, as = bs[after.span[0]:after.span[1]], as[after.span[0]:after.span[2]]
	}
	for i, j := 0, 0; i < len(bs) || j < len(as); {
		switch {
		case i < len(bs) && j < len(as) && before.id(&bs[i]) == after.id(&as[j]):
			i++
			j++
		case j == len(as) || i < len(bs) && CompareIDs(before.id(&bs[i]), after.id(&as[j])) < 0:
			gone = append(gone, &bs[i])
			i++
		default:
			added = append(added, &as[j])
			j++
		}
	}
	// Lines with the id of an archived task are "shadowed" by Load; the
	// agent may have added them.
	for i := range after.shadowed {
		if _, ok := before.find(after.id(&after.shadowed[i])); !ok {
			added = append(added, &after.shadowed[i])
		}
	}
	slices.SortStableFunc(added, func(a, b *entry) int { return int(a.line) - int(b.line) })
	for _, e := range added {
		if wasShadowed[after.id(e)] {
			continue
		}
		t := after.task(e)
		if before.archivedTask(t.ID) != nil {
			add(after.activeName, t, "id %s is already used by a completed task (in %s); pick a new id", t.ID, after.doneName)
			continue
		}
		if pid := t.Parent(); pid != "" {
			if _, active := before.find(pid); !active && before.archivedTask(pid) != nil {
				add(after.activeName, t, "parent %s is already complete; add the task somewhere else", pid)
			}
		}
		if t.Status == StatusActive {
			add(after.activeName, t, `a new task must start as "pending" (the loop claims tasks)`)
		}
	}
	for _, e := range gone {
		if after.archived(before.id(e)) != nil {
			continue
		}
		probs = append(probs, Problem{File: after.activeName, ID: before.id(e),
			Msg: fmt.Sprintf("was deleted without being completed (it was on line %d); mark it complete or blocked instead", e.line)})
	}
	// The archive is append-only: its old lines are normally the same
	// lines in the same places, checked without building an index.
	same := 0
	if len(before.done) > 0 && len(after.done) >= len(before.done) && &before.done[0] == &after.done[0] &&
		len(before.doneData) > 0 && len(after.doneData) > 0 && &before.doneData[0] == &after.doneData[0] {
		same = len(before.done) // the very same records of the very same bytes
	}
	for same < len(before.done) && same < len(after.done) && before.id(&before.done[same]) == after.id(&after.done[same]) &&
		string(before.raw(&before.done[same])) == string(after.raw(&after.done[same])) {
		same++
	}
	for i := same; i < len(before.done); i++ {
		e := &before.done[i]
		id := before.id(e)
		a := after.archived(id)
		switch {
		case a == nil:
			probs = append(probs, Problem{File: after.doneName, ID: id,
				Msg: fmt.Sprintf("was removed from the archive, which is append-only (it was on line %d)", e.line)})
		case before.archived(id) == e && a.n != 0 && e.n != 0 && string(after.raw(a)) != string(before.raw(e)):
			probs = append(probs, Problem{File: after.doneName, Line: int(a.line), ID: id, Msg: "was changed in the archive, which is append-only"})
		}
	}
	if len(probs) > 0 {
		return &ValidationError{probs}
	}
	return nil
}
