package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The state journal keeps the cost of saving state flat in the number of
// items. state.json is the whole document; while a run goes on, each
// change appends one line to state.journal.jsonl beside it holding only
// what changed: the run's own fields (small: no items, no order), the
// records of the items that changed, and the order when it changed. A
// reader (LoadState) applies the journal to the document, so `ralph
// status --json` prints the same document whatever is on disk.
//
// The journal is folded into state.json (compaction) when a run opens and
// stops, and when it has grown past a few times the document's size, so
// that writing the document costs O(1) per change amortised.
//
// Compaction appends the latest changes to the journal first, then writes
// the document (atomically), then replaces the journal by an empty one
// (atomically). Each line holds whole records, so replaying the old
// journal over the new document yields the new document: a reader that
// sees the new document beside the old journal, or a crash between the two
// renames, loses nothing. A reader that sees the old document beside the
// new journal notices that state.json changed while it read and reads
// again.

// journalEntry is one line of the journal.
type journalEntry struct {
	Run   json.RawMessage `json:"run"` // the State without items and order
	Items []*ItemState    `json:"items,omitempty"`
	Order []string        `json:"order,omitempty"`
}

// JournalPath is the journal beside a state file.
func JournalPath(statePath string) string {
	return strings.TrimSuffix(statePath, ".json") + ".journal.jsonl"
}

// journalCompactMin is the journal size below which it is never folded
// into the document, whatever the document's size.
const journalCompactMin = 256 << 10

// Touch marks an item's record as changed, for code that changes a record
// it did not get from Item: the journal writes the records marked since
// the last write (and those of the iterations under way).
func (st *State) Touch(id string) {
	if st.frozen {
		// A snapshot's records are shared with other snapshots: the one
		// about to change is copied first. Ralph's own code never does
		// this (its tests fail if it does): a source copies what it
		// changes (State.Clone).
		if journalChecked {
			panic("state snapshot changed: record " + id + " (a snapshot is read-only; copy it with State.Clone)")
		}
		if is, ok := st.Items[id]; ok {
			c := *is
			st.Items[id] = &c
		}
		return
	}
	if st.dirty == nil {
		st.dirty = map[string]bool{}
	}
	st.dirty[id] = true
	if st.fresh == nil {
		st.fresh = map[string]bool{}
	}
	st.fresh[id] = true
}

// setOrder replaces the item order when it differs, and marks it changed.
func (st *State) setOrder(ids []string) {
	if slices.Equal(st.Order, ids) {
		return
	}
	st.Order = append(st.Order[:0:0], ids...)
	st.orderChanged = true
}

// headJSON marshals the run's own fields: everything but items and order.
func (st *State) headJSON() ([]byte, error) {
	h := *st
	h.Items, h.Order = nil, nil
	return json.Marshal(&h)
}

// delta marshals one journal line: the run's fields, the items marked
// changed (and those of the iterations under way), the order if it
// changed. It clears the marks. Called with the box's mu held.
func (b *stateBox) delta() ([]byte, error) {
	st := b.st
	head, err := st.headJSON()
	if err != nil {
		return nil, err
	}
	e := journalEntry{Run: head}
	for _, c := range st.Current {
		st.Touch(c.Item)
	}
	for id := range b.running {
		st.Touch(id)
	}
	b.noteRunning()
	ids := make([]string, 0, len(st.dirty))
	for id := range st.dirty {
		if st.Items[id] != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		e.Items = append(e.Items, st.Items[id])
	}
	if st.orderChanged {
		e.Order = st.Order
		if e.Order == nil {
			e.Order = []string{}
		}
	}
	if journalChecked {
		b.checkMarks()
	}
	clear(st.dirty)
	st.orderChanged = false
	line, err := json.Marshal(&e)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// noteRunning records the items of the iterations under way, whose records
// the next line holds whatever their marks. Called with mu held.
func (b *stateBox) noteRunning() {
	clear(b.running)
	for _, c := range b.st.Current {
		b.running[c.Item] = true
	}
}

// journalChecked turns on, in ralph's own tests (RALPH_CHECK_JOURNAL=1),
// a check at every write that no item record and no order changed without
// being marked: a change the journal would miss. It costs a marshal of
// every record per write, so it is never on for users.
var journalChecked = os.Getenv("RALPH_CHECK_JOURNAL") == "1"

// checkMarks panics when a record changed since the last write without a
// mark. Called with mu held, before the marks are cleared.
func (b *stateBox) checkMarks() {
	st := b.st
	if b.shadow == nil {
		b.shadow = map[string][]byte{}
	}
	var missed []string
	for id, is := range st.Items {
		cur, _ := json.Marshal(is)
		if old, ok := b.shadow[id]; (!ok || !bytes.Equal(old, cur)) && !st.dirty[id] {
			missed = append(missed, fmt.Sprintf("%s: %s -> %s", id, old, cur))
		}
		b.shadow[id] = cur
	}
	if !st.orderChanged && !slices.Equal(b.shadowOrder, st.Order) {
		missed = append(missed, fmt.Sprintf("order: %v -> %v", b.shadowOrder, st.Order))
	}
	b.shadowOrder = slices.Clone(st.Order)
	if len(missed) > 0 {
		panic("state journal: records changed without a mark (use State.Item or State.Touch):\n" + strings.Join(missed, "\n"))
	}
}

// resetShadow records the state as written in full (check mode).
func (b *stateBox) resetShadow() {
	if !journalChecked {
		return
	}
	b.shadow = map[string][]byte{}
	for id, is := range b.st.Items {
		b.shadow[id], _ = json.Marshal(is)
	}
	b.shadowOrder = slices.Clone(b.st.Order)
}

// applyJournal replays the journal at path over st. A last line without
// its newline is a write a crash cut short and is ignored; any other bad
// line makes the state corrupt.
func applyJournal(st *State, path string, data []byte) error {
	n := 0
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil // torn last line
		}
		line := data[:i]
		data = data[i+1:]
		n++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return &CorruptStateError{Path: path, Err: fmt.Errorf("line %d: %w", n, err)}
		}
		items, order := st.Items, st.Order
		var head State
		if err := json.Unmarshal(e.Run, &head); err != nil {
			return &CorruptStateError{Path: path, Err: fmt.Errorf("line %d: %w", n, err)}
		}
		*st = head
		st.Items, st.Order = items, order
		for _, is := range e.Items {
			if is != nil && is.ID != "" {
				st.Items[is.ID] = is
			}
		}
		if e.Order != nil {
			st.Order = e.Order
		}
	}
	return nil
}

// readJournal reads the journal beside a state file; a missing one is empty.
func readJournal(statePath string) ([]byte, error) {
	b, err := os.ReadFile(JournalPath(statePath))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// removeState removes a state file and its journal.
func removeState(path string) error {
	for _, p := range []string{path, JournalPath(path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
