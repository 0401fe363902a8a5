package tasks

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Get finds a task by id, active or archived (archived ones have status
// "complete" and Archived() true).
func (s *Set) Get(id string) (*Task, bool) {
	if i, ok := s.find(id); ok {
		return s.active[i], true
	}
	t, ok := s.archived[id]
	return t, ok
}

// Len is the number of tasks in tasks.jsonl.
func (s *Set) Len() int { return len(s.active) }

// List returns tasks in id order: all of tasks.jsonl for "", else those
// with the given status; "complete" lists archived tasks too.
func (s *Set) List(status string) []*Task {
	if status == "" {
		return slices.Clone(s.active)
	}
	out := s.Open(status)
	if status == StatusComplete {
		out = append(out, s.archivedOnce()...)
		slices.SortStableFunc(out, byID)
	}
	return out
}

// Open returns the tasks of tasks.jsonl (not the archive) with the given
// status, in id order.
func (s *Set) Open(status string) []*Task {
	var out []*Task
	for _, t := range s.active {
		if t.Status == status {
			out = append(out, t)
		}
	}
	return out
}

// Next is the first pending leaf in id order that is not inside a blocked
// container, or nil.
func (s *Set) Next() *Task {
	blocked := ""
	for _, t := range s.active {
		if blocked != "" && isAncestor(blocked, t.ID) {
			continue
		}
		blocked = ""
		if t.Status == StatusBlocked && !t.Leaf {
			blocked = t.ID
			continue
		}
		if t.Leaf && t.Status == StatusPending {
			return t
		}
	}
	return nil
}

// Archived is the archive's tasks, each id once (its first line), in
// the archive's order.
func (s *Set) Archived() []*Task { return s.archivedOnce() }

// archivedOnce is the archive's tasks, each id once (its first line).
func (s *Set) archivedOnce() []*Task {
	var out []*Task
	for _, t := range s.done {
		if s.archived[t.ID] == t {
			out = append(out, t)
		}
	}
	return out
}

// notFound is the error for an id that is in neither file.
func (s *Set) notFound(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty task id", ErrNotFound)
	}
	return fmt.Errorf("%w: %s is not in %s or %s", ErrNotFound, id, s.activeName, s.doneName)
}

// activeTask finds id among the active tasks, with a user-ready error if it
// is archived or unknown.
func (s *Set) activeTask(id string) (*Task, error) {
	if i, ok := s.find(id); ok {
		return s.active[i], nil
	}
	if t := s.archived[id]; t != nil {
		return nil, fmt.Errorf("task %s is already complete%s", id, completedOn(t))
	}
	return nil, s.notFound(id)
}

func completedOn(t *Task) string {
	if t.Completed != "" {
		return " (" + t.Completed + ")"
	}
	return ""
}

func (s *Set) insert(t *Task) {
	i, _ := s.find(t.ID)
	s.active = slices.Insert(s.active, i, t)
	s.changed = true
}

// becomeContainer turns t into a container for new subtasks: a task that
// gets subtasks is no longer worked on itself.
func becomeContainer(t *Task) {
	if t.Leaf {
		t.Leaf = false
		if t.Status == StatusActive || t.Status == StatusBlocked {
			t.Status = StatusPending
			t.Reason = ""
		}
	}
}

// nextChildNumber is one more than the highest numeric last segment among
// parent's children, active or archived.
func (s *Set) nextChildNumber(parent string) int {
	max := 0
	consider := func(id string) {
		if ParentID(id) == parent {
			if n := lastNumber(id); n > max {
				max = n
			}
		}
	}
	for _, t := range s.active {
		consider(t.ID)
	}
	for _, t := range s.done {
		consider(t.ID)
	}
	return max + 1
}

// nextTopID continues the top-level ids: letters (A, B … Z, AA) unless the
// tree only uses numbers.
func (s *Set) nextTopID() string {
	maxLetters, maxNum, numbers := "", 0, false
	consider := func(id string) {
		if strings.IndexByte(id, '.') >= 0 {
			return
		}
		switch segClass(id) {
		case segLetters:
			if maxLetters == "" || compareSeg(id, maxLetters) > 0 {
				maxLetters = id
			}
		case segNumber:
			numbers = true
			if n := lastNumber(id); n > maxNum {
				maxNum = n
			}
		}
	}
	for _, t := range s.active {
		consider(t.ID)
	}
	for _, t := range s.done {
		consider(t.ID)
	}
	var id string
	switch {
	case maxLetters != "":
		id = nextLetters(maxLetters)
	case numbers:
		id = strconv.Itoa(maxNum + 1)
	default:
		id = "A"
	}
	for s.taken(id) { // only when a hand-made id is in the way
		id = nextLetters(id)
	}
	return id
}

func (s *Set) taken(id string) bool {
	_, ok := s.Get(id)
	return ok
}

func cleanTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		return "", fmt.Errorf("a task needs a title")
	}
	return title, nil
}

func checkParent(s *Set, parent string) (*Task, error) {
	p, err := s.activeTask(parent)
	if err != nil {
		if s.archived[parent] != nil {
			return nil, fmt.Errorf("cannot add subtasks to %s: it is already complete", parent)
		}
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("parent task %s does not exist (%w)", parent, err)
		}
		return nil, fmt.Errorf("parent: %w", err)
	}
	return p, nil
}

// Add adds a pending leaf task. With id "" it takes the next free id: the
// next child number under parent, or the next top-level letter. With an
// id, parent may be "" (it follows from the id) or must match it. If the
// parent was a leaf it becomes a container (and pending, if it was active
// or blocked).
func (s *Set) Add(id, title, parent string) (*Task, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return nil, err
	}
	var p *Task
	if id == "" {
		if parent != "" {
			if p, err = checkParent(s, parent); err != nil {
				return nil, err
			}
			id = parent + "." + strconv.Itoa(s.nextChildNumber(parent))
		} else {
			id = s.nextTopID()
		}
	} else {
		if p := idProblem("task id", id); p != "" {
			return nil, errors.New(p)
		}
		pid := ParentID(id)
		if parent != "" && parent != pid {
			return nil, fmt.Errorf("task id %s does not belong under %s (its parent would be %q)", id, parent, pid)
		}
		if t, ok := s.Get(id); ok {
			if t.Archived() {
				return nil, fmt.Errorf("task id %s is already used by a completed task", id)
			}
			return nil, fmt.Errorf("task %s already exists", id)
		}
		if pid != "" {
			if p, err = checkParent(s, pid); err != nil {
				return nil, err
			}
		}
	}
	if p != nil {
		becomeContainer(p)
	}
	t := &Task{ID: id, Title: title, Status: StatusPending, Leaf: true}
	s.insert(t)
	return t, nil
}

// Split turns task id into a container of new pending leaf subtasks, one
// per title, numbered after any existing children (id.1, id.2, …).
func (s *Set) Split(id string, titles []string) ([]*Task, error) {
	if len(titles) == 0 {
		return nil, fmt.Errorf("split %s: give at least one subtask title", id)
	}
	clean := make([]string, len(titles))
	for i, title := range titles {
		c, err := cleanTitle(title)
		if err != nil {
			return nil, fmt.Errorf("split %s: subtask %d needs a title", id, i+1)
		}
		clean[i] = c
	}
	p, err := s.activeTask(id)
	if err != nil {
		return nil, err
	}
	becomeContainer(p)
	n := s.nextChildNumber(id)
	out := make([]*Task, len(clean))
	for i, title := range clean {
		t := &Task{ID: id + "." + strconv.Itoa(n+i), Title: title, Status: StatusPending, Leaf: true}
		s.insert(t)
		out[i] = t
	}
	return out, nil
}

// Claim marks a pending leaf active. With id "" it claims Next() and
// returns ErrNoTask if there is none.
func (s *Set) Claim(id string) (*Task, error) {
	var t *Task
	if id == "" {
		if t = s.Next(); t == nil {
			return nil, s.noTaskError()
		}
	} else {
		var err error
		if t, err = s.activeTask(id); err != nil {
			return nil, err
		}
		if !t.Leaf {
			return nil, fmt.Errorf("task %s has subtasks; claim one of them instead", id)
		}
		switch t.Status {
		case StatusPending:
		case StatusBlocked:
			return nil, fmt.Errorf("task %s is blocked (%s); unblock it first", id, t.Reason)
		default:
			return nil, fmt.Errorf("task %s is %s, not pending", id, t.Status)
		}
	}
	t.Status = StatusActive
	return t, nil
}

func (s *Set) noTaskError() error {
	var active, blocked int
	for i := range s.active {
		switch s.active[i].Status {
		case StatusActive:
			active++
		case StatusBlocked:
			blocked++
		}
	}
	if active+blocked == 0 {
		return ErrNoTask
	}
	return fmt.Errorf("%w (%d active, %d blocked)", ErrNoTask, active, blocked)
}

// Complete archives leaf task id with the given commit, then every parent
// whose subtasks are now all archived (recursively). It returns the
// archived tasks, the leaf first.
func (s *Set) Complete(id, commit string, now time.Time) ([]*Task, error) {
	t, err := s.activeTask(id)
	if err != nil {
		return nil, err
	}
	if !t.Leaf {
		return nil, fmt.Errorf("task %s has subtasks; it completes by itself when all of them are complete", id)
	}
	t.Completed = ""
	s.archive(t, commit, now)
	out := []*Task{t}
	for pid := ParentID(id); pid != ""; pid = ParentID(pid) {
		i, ok := s.find(pid)
		if !ok {
			break
		}
		if i+1 < len(s.active) && isAncestor(pid, s.active[i+1].ID) {
			break // still has unfinished subtasks
		}
		p := s.active[i]
		p.Completed = ""
		s.archive(p, commit, now)
		out = append(out, p)
	}
	return out, nil
}

// Block marks task id blocked with a reason.
func (s *Set) Block(id, reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return fmt.Errorf("block %s: give a reason", id)
	}
	t, err := s.activeTask(id)
	if err != nil {
		return err
	}
	if t.Status == StatusComplete {
		return fmt.Errorf("task %s is marked complete; it cannot be blocked", id)
	}
	t.Status = StatusBlocked
	t.Reason = reason
	return nil
}

// Release puts an active or blocked task back to pending and clears its
// reason (unblock, or give up a claim).
func (s *Set) Release(id string) (*Task, error) {
	t, err := s.activeTask(id)
	if err != nil {
		return nil, err
	}
	if t.Status == StatusComplete {
		return nil, fmt.Errorf("task %s is marked complete; it cannot be reopened", id)
	}
	t.Status = StatusPending
	t.Reason = ""
	return t, nil
}

// Tree renders all tasks, archived ones included, as an indented outline:
//
//	[ ] A implement auth
//	  [x] A.1 setup session store
//	  [>] A.2 add login endpoint
//	  [!] A.3 deploy (blocked: no credentials)
func (s *Set) Tree() string {
	all := append(slices.Clone(s.active), s.archivedOnce()...)
	slices.SortStableFunc(all, byID)
	var b strings.Builder
	for _, t := range all {
		b.WriteString(strings.Repeat("  ", depth(t.ID)))
		switch {
		case t.Archived() || t.Status == StatusComplete:
			b.WriteString("[x] ")
		case t.Status == StatusActive:
			b.WriteString("[>] ")
		case t.Status == StatusBlocked:
			b.WriteString("[!] ")
		default:
			b.WriteString("[ ] ")
		}
		b.WriteString(t.ID)
		b.WriteByte(' ')
		b.WriteString(t.Title)
		if t.Status == StatusBlocked && t.Reason != "" {
			b.WriteString(" (blocked: " + t.Reason + ")")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
