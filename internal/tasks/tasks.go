// Package tasks stores the task tree of a ralph project: tasks.jsonl holds
// the active tasks (pending, active, blocked), tasks-done.jsonl is the
// append-only archive of completed ones. One task per line, in this exact
// form (a person can read, grep and edit it):
//
//	{"id":"A","title":"implement auth","status":"pending","leaf":false}
//	{"id":"A.1","title":"setup session store","status":"pending","leaf":true}
//
// Ids are dotted ("A.1.2" is a child of "A.1"); only leaf tasks are worked
// on, and a parent completes by itself when all its subtasks are complete.
//
// All changes go through Store.Update: under a file lock it reads and
// validates both files, runs the caller's function on the Set, validates
// again, appends newly completed tasks to the archive and then replaces
// tasks.jsonl atomically, sorted by id. If it fails nothing is written.
// Lines nobody changed are written back byte for byte, unknown fields
// included.
package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Task statuses. StatusComplete appears in tasks.jsonl only when an agent
// wrote it there by hand; the next Update moves such a task to the archive.
const (
	StatusPending  = "pending"
	StatusActive   = "active"
	StatusBlocked  = "blocked"
	StatusComplete = "complete"
)

// Statuses lists the valid statuses.
var Statuses = []string{StatusPending, StatusActive, StatusBlocked, StatusComplete}

// ValidStatus reports whether s is one of Statuses.
func ValidStatus(s string) bool {
	switch s {
	case StatusPending, StatusActive, StatusBlocked, StatusComplete:
		return true
	}
	return false
}

// Task is one line of tasks.jsonl or tasks-done.jsonl. Fields may be
// changed inside Update (changing ID is not supported: use the Set's
// methods); changed tasks are re-encoded, unchanged ones keep their bytes.
type Task struct {
	ID     string
	Title  string
	Status string
	Leaf   bool
	// Reason says why a task is blocked.
	Reason string
	// Completed (RFC 3339, UTC) and Commit are set when a task is archived.
	Completed string
	Commit    string

	raw      []byte // the line as read, nil for a new task
	orig     core   // the fields as read, to tell whether t changed
	line     int    // line number in its file, 0 for a new task
	archived bool
	// The line had no "status" or "leaf": a write adds them. Without
	// "leaf", a task is a leaf unless it has subtasks.
	noStatus, noLeaf bool
	// The task's own agent settings (see Settings).
	agent, model string
	critical     bool
	// allowTestChanges: see AllowTestChanges.
	allowTestChanges bool
}

type core struct {
	ID, Title, Status, Reason, Completed, Commit string
	Leaf                                         bool
}

func (t *Task) core() core {
	return core{t.ID, t.Title, t.Status, t.Reason, t.Completed, t.Commit, t.Leaf}
}

func (t *Task) dirty() bool { return t.raw == nil || t.noStatus || t.noLeaf || t.core() != t.orig }

// Archived reports whether t is in tasks-done.jsonl (or is about to be
// appended to it by the running Update).
func (t *Task) Archived() bool { return t.archived }

// Parent is the id of t's parent, "" for a top-level task.
func (t *Task) Parent() string { return ParentID(t.ID) }

// LineNo is the line t was read from (0 for a task added since).
func (t *Task) LineNo() int { return t.line }

// Field returns the raw JSON value of any field of t's line as read,
// including fields this package does not know.
func (t *Task) Field(key string) (json.RawMessage, bool) {
	for _, f := range fields(t.raw) {
		if f.key == key {
			return f.val, true
		}
	}
	return nil, false
}

// Settings are the task's own agent settings: its "agent", "model" and
// "critical" fields (their types were checked when the line was read).
func (t *Task) Settings() (agent, model string, critical bool) {
	return t.agent, t.model, t.critical
}

// AllowTestChanges is the task's "allow_test_changes" field: the task may
// make tests that passed at its base go missing or skip (a deliberate
// removal); otherwise such a task does not pass.
func (t *Task) AllowTestChanges() bool { return t.allowTestChanges }

// Encode returns t as its JSONL line (without the newline): unchanged
// tasks as read, changed ones as id, title, status, leaf, then the other
// fields in their original order.
func (t *Task) Encode() []byte {
	if !t.dirty() {
		return append([]byte(nil), t.raw...)
	}
	return appendTask(nil, t)
}

// MarshalJSON encodes t like its line in the file.
func (t *Task) MarshalJSON() ([]byte, error) { return t.Encode(), nil }

// Store is a tasks.jsonl file with its archive and lock file.
type Store struct {
	ActivePath string // tasks.jsonl
	DonePath   string // tasks-done.jsonl, beside it
	LockPath   string // tasks.jsonl.lock, taken by Update
	// HoldPath (tasks.jsonl.hold) lists, one per line, the ids of tasks a
	// running loop is verifying: a leaf marked "complete" in tasks.jsonl
	// whose id is held stays there (it is only the agent's claim) until
	// the loop archives it with its merge commit. A missing file holds
	// nothing.
	HoldPath string
	// Now is the clock for completion times (time.Now when nil).
	Now func() time.Time
}

// Open returns the Store for activePath ("…/tasks.jsonl"). The archive is
// the file beside it with "-done" added ("tasks-done.jsonl"), the lock file
// activePath+".lock". Nothing is read until Load or Update.
func Open(activePath string) *Store {
	dir := filepath.Dir(activePath)
	base := filepath.Base(activePath)
	ext := filepath.Ext(base)
	return &Store{
		ActivePath: activePath,
		DonePath:   filepath.Join(dir, strings.TrimSuffix(base, ext)+"-done"+ext),
		LockPath:   activePath + ".lock",
		HoldPath:   activePath + ".hold",
	}
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ErrNotFound is wrapped by errors about a task id that does not exist.
var ErrNotFound = errors.New("no such task")

// ErrNoTask is returned by Claim("") when no pending leaf task is left.
var ErrNoTask = errors.New("no pending leaf task")

// Problem is one validation failure, located in a file.
type Problem struct {
	File string
	Line int    // 0 when the task was not read from the file
	ID   string // the task concerned, if known
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.ID != "" {
		fmt.Fprintf(&b, "task %s: ", shownID(p.ID))
	}
	b.WriteString(p.Msg)
	return b.String()
}

// shownID is id for a message: as it is, unless it is too long or holds
// control characters (a hand-written line's), then quoted and cut short.
func shownID(id string) string {
	r := []rune(id)
	if len(r) <= maxIDLen && !strings.ContainsFunc(id, unicode.IsControl) {
		return id
	}
	if len(r) > 40 {
		return strconv.Quote(string(r[:40])) + "…"
	}
	return strconv.Quote(id)
}

// ValidationError lists every problem found at once, so a person or agent
// fixing the file needs one round trip, not one per mistake.
type ValidationError struct{ Problems []Problem }

const maxShown = 25

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i == maxShown {
			fmt.Fprintf(&b, "\n… and %d more problems", len(e.Problems)-maxShown)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}
