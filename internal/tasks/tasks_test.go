package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

const seed = `{"id":"A","title":"implement auth","status":"pending","leaf":false}
{"id":"A.1","title":"setup session store","status":"pending","leaf":false}
{"id":"A.1.1","title":"choose session library","status":"pending","leaf":true}
{"id":"A.1.2","title":"implement middleware","status":"pending","leaf":true}
{"id":"A.2","title":"add login endpoint","status":"pending","leaf":true}
{"id":"B","title":"write tests","status":"pending","leaf":true}
`

var now = time.Date(2026, 1, 21, 10, 30, 0, 0, time.UTC)

func newStore(t *testing.T, active, done string) *Store {
	t.Helper()
	dir := t.TempDir()
	s := Open(filepath.Join(dir, "tasks.jsonl"))
	s.Now = func() time.Time { return now }
	if active != "" {
		write(t, s.ActivePath, active)
	}
	if done != "" {
		write(t, s.DonePath, done)
	}
	return s
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func mustLoad(t *testing.T, s *Store) *Set {
	t.Helper()
	set, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func update(t *testing.T, s *Store, fn func(*Set) error) {
	t.Helper()
	if err := s.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func ids(ts []*Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func TestOpenPaths(t *testing.T) {
	s := Open("/p/tasks.jsonl")
	if s.DonePath != "/p/tasks-done.jsonl" || s.LockPath != "/p/tasks.jsonl.lock" {
		t.Fatalf("%+v", s)
	}
}

func TestValidIDAndOrder(t *testing.T) {
	for _, id := range []string{"A", "A.1", "A.1.1", "auth-2_x.10"} {
		if idProblem("id", id) != "" {
			t.Errorf("%q should be valid", id)
		}
	}
	for _, id := range []string{"", ".", "A.", ".A", "A..1", "A 1", "A/1", "Ä"} {
		if idProblem("id", id) == "" {
			t.Errorf("%q should be invalid", id)
		}
	}
	in := []string{"B", "A.10", "A.2", "AA", "A", "A.1.1", "Z", "A.1", "10", "9", "auth", "A.02"}
	slices.SortFunc(in, CompareIDs)
	want := []string{"9", "10", "A", "A.1", "A.1.1", "A.2", "A.02", "A.10", "B", "Z", "AA", "auth"}
	if !slices.Equal(in, want) {
		t.Fatalf("got %v\nwant %v", in, want)
	}
	if ParentID("A.1.2") != "A.1" || ParentID("A") != "" {
		t.Fatal("ParentID")
	}
	for in, want := range map[string]string{"A": "B", "Z": "AA", "AZ": "BA", "ZZ": "AAA"} {
		if got := nextLetters(in); got != want {
			t.Errorf("nextLetters(%s)=%s want %s", in, got, want)
		}
	}
}

func TestLoadSeed(t *testing.T) {
	s := newStore(t, seed, "")
	set := mustLoad(t, s)
	if set.Len() != 6 || len(set.Warnings()) != 0 {
		t.Fatal(set.Len(), set.Warnings())
	}
	a, ok := set.Get("A.1.1")
	if !ok || a.Title != "choose session library" || !a.Leaf || a.Status != StatusPending || a.LineNo() != 3 {
		t.Fatalf("%+v", a)
	}
	if n := set.Next(); n == nil || n.ID != "A.1.1" {
		t.Fatal(n)
	}
	if got := strings.Join(ids(set.List(StatusPending)), " "); got != "A A.1 A.1.1 A.1.2 A.2 B" {
		t.Fatal(got)
	}
}

func TestMissingFilesAreEmpty(t *testing.T) {
	s := newStore(t, "", "")
	set := mustLoad(t, s)
	if set.Len() != 0 || set.Next() != nil {
		t.Fatal("not empty")
	}
	update(t, s, func(set *Set) error {
		_, err := set.Add("", "first", "")
		return err
	})
	if got := read(t, s.ActivePath); got != `{"id":"A","title":"first","status":"pending","leaf":true}`+"\n" {
		t.Fatal(got)
	}
}

func TestRoundTripKeepsUntouchedLinesAndUnknownFields(t *testing.T) {
	in := `{"id":"A","title":"implement auth","status":"pending","leaf":false}
{"id": "A.1", "title": "spaced \u00e9 <b>", "status": "pending", "leaf": true, "prio": [1, {"x": null}]}
{"title":"reordered","id":"A.2","note":"keep me","leaf":true,"status":"pending","est":3.5e2}
{"id":"B","title":"write tests","status":"blocked","leaf":true,"reason":"waiting","x":1}
`
	s := newStore(t, in, "")
	// A no-op update writes nothing.
	update(t, s, func(*Set) error { return nil })
	if got := read(t, s.ActivePath); got != in {
		t.Fatalf("no-op update changed the file:\n%s", got)
	}
	update(t, s, func(set *Set) error {
		if _, err := set.Claim("A.2"); err != nil {
			return err
		}
		_, err := set.Release("B")
		return err
	})
	lines := strings.Split(read(t, s.ActivePath), "\n")
	want := []string{
		`{"id":"A","title":"implement auth","status":"pending","leaf":false}`,
		`{"id": "A.1", "title": "spaced \u00e9 <b>", "status": "pending", "leaf": true, "prio": [1, {"x": null}]}`,
		`{"id":"A.2","title":"reordered","status":"active","leaf":true,"note":"keep me","est":3.5e2}`,
		`{"id":"B","title":"write tests","status":"pending","leaf":true,"x":1}`,
		``,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	set := mustLoad(t, s)
	a2, _ := set.Get("A.2")
	if v, ok := a2.Field("note"); !ok || string(v) != `"keep me"` {
		t.Fatal(string(v))
	}
	a1, _ := set.Get("A.1")
	if a1.Title != "spaced é <b>" {
		t.Fatal(a1.Title)
	}
	// Changing a title with escapes re-encodes without HTML escaping.
	update(t, s, func(set *Set) error {
		a1, _ := set.Get("A.1")
		a1.Title = `quote " back\slash <tag> & tab	nl` + "\n"
		return nil
	})
	set = mustLoad(t, s)
	a1, _ = set.Get("A.1")
	if a1.Title != "quote \" back\\slash <tag> & tab\tnl\n" {
		t.Fatalf("%q", a1.Title)
	}
	if !strings.Contains(read(t, s.ActivePath), `"title":"quote \" back\\slash <tag> & tab\tnl\n","status":"pending","leaf":true,"prio":[1, {"x": null}]}`) {
		t.Fatal(read(t, s.ActivePath))
	}
}

func TestUnsortedFileIsSortedOnWrite(t *testing.T) {
	in := `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.10","title":"ten","status":"pending","leaf":true}
{"id":"B","title":"b","status":"pending","leaf":true}
{"id":"A.2","title":"two","status":"pending","leaf":true}
`
	s := newStore(t, in, "")
	if n := mustLoad(t, s).Next(); n.ID != "A.2" {
		t.Fatal(n)
	}
	update(t, s, func(*Set) error { return nil })
	want := `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.2","title":"two","status":"pending","leaf":true}
{"id":"A.10","title":"ten","status":"pending","leaf":true}
{"id":"B","title":"b","status":"pending","leaf":true}
`
	if got := read(t, s.ActivePath); got != want {
		t.Fatal(got)
	}
}

func TestAdd(t *testing.T) {
	s := newStore(t, seed, `{"id":"A.3","title":"old","status":"complete","leaf":true,"completed":"2026-01-01T00:00:00Z","commit":"c0"}`+"\n")
	update(t, s, func(set *Set) error {
		for _, c := range []struct{ id, title, parent, want string }{
			{"", "top", "", "C"},
			{"", "child of A", "A", "A.4"}, // A.3 is archived: not reused
			{"", "child of B", "B", "B.1"},
			{"", "child of A.1", "A.1", "A.1.3"},
			{"X.Y", "hand-made", "", ""},
		} {
			if c.id == "X.Y" {
				if _, err := set.Add("X", "x", ""); err != nil {
					return err
				}
			}
			got, err := set.Add(c.id, c.title, c.parent)
			if err != nil {
				return err
			}
			if c.want != "" && got.ID != c.want {
				return fmt.Errorf("Add(%q, %q) = %s, want %s", c.title, c.parent, got.ID, c.want)
			}
		}
		if b, _ := set.Get("B"); b.Leaf {
			return errors.New("B should have become a container")
		}
		return nil
	})
	set := mustLoad(t, s)
	if got := strings.Join(ids(set.List("")), " "); got != "A A.1 A.1.1 A.1.2 A.1.3 A.2 A.4 B B.1 C X X.Y" {
		t.Fatal(got)
	}
	errCases := []struct{ id, title, parent, want string }{
		{"", "  ", "", "a task needs a title"},
		{"A..1", "t", "", `invalid task id "A..1"`},
		{"A.2", "t", "", "task A.2 already exists"},
		{"A.3", "t", "", "already used by a completed task"},
		{"Q.1", "t", "", "parent task Q does not exist (no such task: Q is not in"},
		{"", "t", "Q", "parent task Q does not exist"},
		{"", "t", "A.3", "cannot add subtasks to A.3: it is already complete"},
		{"B.7", "t", "A", "does not belong under A"},
	}
	for _, c := range errCases {
		err := s.Update(func(set *Set) error { _, err := set.Add(c.id, c.title, c.parent); return err })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%q,%q,%q): got %v, want %q", c.id, c.title, c.parent, err, c.want)
		}
	}
	// Numeric top level continues numerically.
	s2 := newStore(t, `{"id":"1","title":"one","status":"pending","leaf":true}`+"\n", "")
	update(t, s2, func(set *Set) error {
		got, err := set.Add("", "two", "")
		if err == nil && got.ID != "2" {
			err = fmt.Errorf("got %s", got.ID)
		}
		return err
	})
}

func TestAddUnderActiveLeafMakesPendingContainer(t *testing.T) {
	s := newStore(t, `{"id":"A","title":"a","status":"active","leaf":true}`+"\n", "")
	update(t, s, func(set *Set) error { _, err := set.Add("", "sub", "A"); return err })
	want := `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.1","title":"sub","status":"pending","leaf":true}
`
	if got := read(t, s.ActivePath); got != want {
		t.Fatal(got)
	}
}

func TestSplit(t *testing.T) {
	s := newStore(t, seed, `{"id":"A.1.3","title":"done before","completed":"2024-01-21","commit":"abc"}`+"\n")
	var got []*Task
	update(t, s, func(set *Set) error {
		var err error
		if got, err = set.Split("A.1", []string{"x", "y"}); err != nil {
			return err
		}
		_, err = set.Split("B", []string{"b1"})
		return err
	})
	if strings.Join(ids(got), " ") != "A.1.4 A.1.5" {
		t.Fatal(ids(got))
	}
	set := mustLoad(t, s)
	b, _ := set.Get("B")
	b1, _ := set.Get("B.1")
	if b.Leaf || b1 == nil || !b1.Leaf || b1.Status != StatusPending {
		t.Fatal(b, b1)
	}
	for _, c := range []struct {
		id     string
		titles []string
		want   string
	}{
		{"B", nil, "give at least one subtask title"},
		{"B", []string{"ok", ""}, "subtask 2 needs a title"},
		{"Z", []string{"z"}, "no such task: Z"},
		{"A.1.3", []string{"z"}, "task A.1.3 is already complete (2024-01-21)"},
	} {
		err := s.Update(func(set *Set) error { _, err := set.Split(c.id, c.titles); return err })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Split(%s): %v, want %q", c.id, err, c.want)
		}
	}
}

func TestClaimNaturalOrder(t *testing.T) {
	in := `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.1","title":"one","status":"active","leaf":true}
{"id":"A.2","title":"two","status":"pending","leaf":true}
{"id":"A.10","title":"ten","status":"pending","leaf":true}
`
	s := newStore(t, in, "")
	var order []string
	for i := 0; i < 2; i++ {
		update(t, s, func(set *Set) error {
			c, err := set.Claim("")
			if err == nil {
				order = append(order, c.ID)
			}
			return err
		})
	}
	if strings.Join(order, " ") != "A.2 A.10" {
		t.Fatal(order)
	}
	err := s.Update(func(set *Set) error { _, err := set.Claim(""); return err })
	if !errors.Is(err, ErrNoTask) || !strings.Contains(err.Error(), "3 active") {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"A":   "task A has subtasks; claim one of them instead",
		"A.1": "task A.1 is active, not pending",
		"A.9": "no such task: A.9",
	} {
		err := s.Update(func(set *Set) error { _, err := set.Claim(id); return err })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Claim(%s): %v, want %q", id, err, want)
		}
	}
	update(t, s, func(set *Set) error { return set.Block("A.2", "needs a key") })
	err = s.Update(func(set *Set) error { _, err := set.Claim("A.2"); return err })
	if err == nil || err.Error() != "task A.2 is blocked (needs a key); unblock it first" {
		t.Fatal(err)
	}
}

func TestCompleteArchivesParentsImplicitly(t *testing.T) {
	s := newStore(t, seed, "")
	var archived []*Task
	update(t, s, func(set *Set) error {
		_, err := set.Complete("A.1.1", "abc", now)
		return err
	})
	update(t, s, func(set *Set) error {
		var err error
		archived, err = set.Complete("A.1.2", "def", now)
		return err
	})
	if strings.Join(ids(archived), " ") != "A.1.2 A.1" {
		t.Fatal(ids(archived))
	}
	wantActive := `{"id":"A","title":"implement auth","status":"pending","leaf":false}
{"id":"A.2","title":"add login endpoint","status":"pending","leaf":true}
{"id":"B","title":"write tests","status":"pending","leaf":true}
`
	wantDone := `{"id":"A.1.1","title":"choose session library","status":"complete","leaf":true,"completed":"2026-01-21T10:30:00Z","commit":"abc"}
{"id":"A.1.2","title":"implement middleware","status":"complete","leaf":true,"completed":"2026-01-21T10:30:00Z","commit":"def"}
{"id":"A.1","title":"setup session store","status":"complete","leaf":false,"completed":"2026-01-21T10:30:00Z","commit":"def"}
`
	if got := read(t, s.ActivePath); got != wantActive {
		t.Fatal(got)
	}
	if got := read(t, s.DonePath); got != wantDone {
		t.Fatal(got)
	}
	set := mustLoad(t, s)
	if a1, ok := set.Get("A.1"); !ok || !a1.Archived() || a1.Status != StatusComplete || a1.Commit != "def" {
		t.Fatal(a1)
	}
	update(t, s, func(set *Set) error {
		got, err := set.Complete("A.2", "ghi", now)
		if err == nil && strings.Join(ids(got), " ") != "A.2 A" {
			err = fmt.Errorf("got %v", ids(got))
		}
		return err
	})
	if got := read(t, s.ActivePath); got != `{"id":"B","title":"write tests","status":"pending","leaf":true}`+"\n" {
		t.Fatal(got)
	}
	for id, want := range map[string]string{
		"A.1.1": "task A.1.1 is already complete (2026-01-21T10:30:00Z)",
		"Q":     "no such task: Q",
	} {
		err := s.Update(func(set *Set) error { _, err := set.Complete(id, "", now); return err })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Complete(%s): %v, want %q", id, err, want)
		}
	}
	s2 := newStore(t, seed, "")
	err := s2.Update(func(set *Set) error { _, err := set.Complete("A", "", now); return err })
	if err == nil || !strings.Contains(err.Error(), "completes by itself") {
		t.Fatal(err)
	}
}

func TestHandMarkedCompleteIsArchivedOnNextUpdate(t *testing.T) {
	in := strings.Replace(seed, `"choose session library","status":"pending"`, `"choose session library","status":"complete","commit":"c1"`, 1)
	in = strings.Replace(in, `"implement middleware","status":"pending"`, `"implement middleware","status":"complete"`, 1)
	s := newStore(t, in, "")
	set := mustLoad(t, s)
	if tk, _ := set.Get("A.1.1"); tk.Status != StatusComplete || tk.Archived() {
		t.Fatal(tk)
	}
	if n := set.Next(); n.ID != "A.2" {
		t.Fatal(n)
	}
	update(t, s, func(*Set) error { return nil })
	done := read(t, s.DonePath)
	if !strings.Contains(done, `{"id":"A.1.1","title":"choose session library","status":"complete","leaf":true,"commit":"c1","completed":"2026-01-21T10:30:00Z"}`) ||
		!strings.Contains(done, `"id":"A.1.2"`) || !strings.Contains(done, `"id":"A.1",`) {
		t.Fatal(done)
	}
	if strings.Contains(read(t, s.ActivePath), `"A.1`) {
		t.Fatal(read(t, s.ActivePath))
	}
}

func TestBlockRelease(t *testing.T) {
	s := newStore(t, seed, "")
	update(t, s, func(set *Set) error { return set.Block("A.1", "upstream is down") })
	if !strings.Contains(read(t, s.ActivePath), `{"id":"A.1","title":"setup session store","status":"blocked","leaf":false,"reason":"upstream is down"}`) {
		t.Fatal(read(t, s.ActivePath))
	}
	// Leaves inside a blocked container are not handed out.
	set := mustLoad(t, s)
	if n := set.Next(); n.ID != "A.2" {
		t.Fatal(n)
	}
	if !strings.Contains(set.Tree(), "  [!] A.1 setup session store (blocked: upstream is down)\n") {
		t.Fatal(set.Tree())
	}
	err := s.Update(func(set *Set) error { return set.Block("A.2", " ") })
	if err == nil || err.Error() != "block A.2: give a reason" {
		t.Fatal(err)
	}
	update(t, s, func(set *Set) error { _, err := set.Release("A.1"); return err })
	if read(t, s.ActivePath) != seed {
		t.Fatal(read(t, s.ActivePath))
	}
}

func TestTree(t *testing.T) {
	s := newStore(t, seed, "")
	update(t, s, func(set *Set) error {
		if _, err := set.Complete("A.1.1", "abc", now); err != nil {
			return err
		}
		_, err := set.Claim("A.1.2")
		return err
	})
	want := `[ ] A implement auth
  [ ] A.1 setup session store
    [x] A.1.1 choose session library
    [>] A.1.2 implement middleware
  [ ] A.2 add login endpoint
[ ] B write tests
`
	if got := mustLoad(t, s).Tree(); got != want {
		t.Fatal(got)
	}
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name, active, done string
		want               []string
	}{
		{"bad json", `{"id":"A","title":"a","status":"pending","leaf":true}
{"id":"B","title":"b",status:"pending"}
{"id":"C","title":"c","status":"pending","leaf":true}
`, "", []string{"tasks.jsonl:2: invalid JSON: invalid character 's' looking for beginning of object key string"}},
		{"torn middle line", `{"id":"A","title":"a","status":"pending","leaf":true}
{"id":"B","tit
{"id":"C","title":"c","status":"pending","leaf":true}
`, "", []string{"tasks.jsonl:2: invalid JSON: unexpected end of JSON input"}},
		{"duplicate", `{"id":"A","title":"a","status":"pending","leaf":true}
{"id":"B","title":"b","status":"pending","leaf":true}
{"id":"A","title":"a again","status":"pending","leaf":true}
`, "", []string{"tasks.jsonl:3: task A: duplicate id (also on line 1)"}},
		{"bad id", `{"id":"A..1","title":"a","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: task A..1: invalid id "A..1"`}},
		{"missing id", `{"title":"a","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: missing "id"`}},
		{"orphan", `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.1","title":"a1","status":"pending","leaf":true}
{"id":"B.1","title":"b1","status":"pending","leaf":true}
`, "", []string{"tasks.jsonl:3: task B.1: parent B does not exist"}},
		{"orphan two levels", `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.1.1","title":"x","status":"pending","leaf":true}
`, "", []string{"tasks.jsonl:2: task A.1.1: parent A.1 does not exist"}},
		{"empty container", `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"B","title":"b","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: task A: is a container ("leaf":false) but has no subtasks; set "leaf":true or add subtasks`}},
		{"leaf with children", `{"id":"A","title":"a","status":"pending","leaf":true}
{"id":"A.1","title":"b","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: task A: is a leaf ("leaf":true) but has subtasks (A.1); set "leaf":false`}},
		{"unknown status", `{"id":"A","title":"a","status":"in_progress","leaf":true}
`, "", []string{`tasks.jsonl:1: task A: unknown status "in_progress" (want pending, active, blocked or complete)`}},
		{"missing title", `{"id":"A","status":"pending","leaf":true}
{"id":"B","title":"  ","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: task A: missing "title"`, `tasks.jsonl:2: task B: missing "title"`}},
		{"wrong types", `{"id":"A","title":7,"status":"pending","leaf":"yes"}
`, "", []string{`tasks.jsonl:1: task A: field "title" must be a string`}},
		{"not an object", `["A"]
{"id":"B","title":"b","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: a task line must be a JSON object`}},
		{"complete container with open children", `{"id":"A","title":"a","status":"complete","leaf":false}
{"id":"A.1","title":"b","status":"pending","leaf":true}
`, "", []string{`tasks.jsonl:1: task A: is marked complete but its subtasks are not (A.1 is pending); complete them first`}},
		{"bad done line", seed, `{"id":"X","title":"x"}
nope
{"id":"Y","title":"y"}
`, []string{"tasks-done.jsonl:2: invalid JSON: invalid character 'o' in literal null (expecting 'u')"}},
		{"done line without id", seed, `{"title":"x"}
`, []string{`tasks-done.jsonl:1: missing "id"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, c.active, c.done)
			_, err := s.Load()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			if len(ve.Problems) != len(c.want) {
				t.Fatalf("got %d problems:\n%v", len(ve.Problems), err)
			}
			for i, p := range ve.Problems {
				got := strings.TrimPrefix(p.String(), filepath.Dir(s.ActivePath)+string(filepath.Separator))
				if !strings.HasPrefix(got, c.want[i]) {
					t.Errorf("problem %d:\n got %s\nwant %s", i, got, c.want[i])
				}
			}
			// Update refuses too and writes nothing.
			if err := s.Update(func(*Set) error { return nil }); err == nil {
				t.Fatal("Update on an invalid file must fail")
			}
			if read(t, s.ActivePath) != c.active {
				t.Fatal("file changed")
			}
		})
	}
}

func TestLenientMissingLeafAndStatus(t *testing.T) {
	in := `{"id":"A","title":"a"}
{"id":"A.1","title":"b","status":"pending"}
`
	s := newStore(t, in, "")
	set := mustLoad(t, s)
	if a, _ := set.Get("A"); a.Leaf || a.Status != StatusPending {
		t.Fatal(a)
	}
	update(t, s, func(*Set) error { return nil })
	want := `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.1","title":"b","status":"pending","leaf":true}
`
	if got := read(t, s.ActivePath); got != want {
		t.Fatal(got)
	}
}

// A torn last line (an append cut short) is refused with its line number,
// by reads and writes alike, and nothing is written: dropping it would
// hand its id out again.
func TestTornLastLine(t *testing.T) {
	for _, tail := range []string{`{"id":"C","title":"c","sta`, `{"id":"C","title":"c","sta` + "\n"} {
		s := newStore(t, seed+tail, "")
		_, err := s.Load()
		if err == nil || !strings.Contains(err.Error(), "tasks.jsonl:7: the last line is cut short") {
			t.Fatalf("Load: %v", err)
		}
		if err := s.Update(func(set *Set) error { _, err := set.Add("", "new", ""); return err }); err == nil || !strings.Contains(err.Error(), "tasks.jsonl:7:") {
			t.Fatalf("Update: %v", err)
		}
		if read(t, s.ActivePath) != seed+tail {
			t.Fatal("the file changed")
		}
	}
}

func TestUpdateWritesNothingOnError(t *testing.T) {
	s := newStore(t, seed, "")
	boom := errors.New("boom")
	err := s.Update(func(set *Set) error {
		set.Complete("A.1.1", "x", now)
		set.Add("", "new", "")
		return boom
	})
	if err != boom {
		t.Fatal(err)
	}
	// A change that breaks validation is refused as a whole.
	err = s.Update(func(set *Set) error {
		set.Complete("A.1.1", "x", now)
		b, _ := set.Get("B")
		b.Status = "done"
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), `task B: unknown status "done"`) {
		t.Fatal(err)
	}
	if read(t, s.ActivePath) != seed || read(t, s.DonePath) != "" {
		t.Fatal("something was written")
	}
}

func TestCrashBetweenArchiveAndRewrite(t *testing.T) {
	s := newStore(t, seed, "")
	crash := errors.New("crash")
	crashAfterArchive = func() error { return crash }
	err := s.Update(func(set *Set) error {
		_, err := set.Complete("A.1.1", "abc", now)
		return err
	})
	crashAfterArchive = nil
	if err != crash {
		t.Fatal(err)
	}
	// The task is now in both files.
	if read(t, s.ActivePath) != seed || !strings.Contains(read(t, s.DonePath), `"id":"A.1.1"`) {
		t.Fatal("unexpected state")
	}
	set := mustLoad(t, s)
	got, _ := set.Get("A.1.1")
	if !got.Archived() || got.Commit != "abc" || set.Len() != 5 {
		t.Fatal(got, set.Len())
	}
	if len(set.Warnings()) != 1 || !strings.Contains(set.Warnings()[0], "already in") {
		t.Fatal(set.Warnings())
	}
	if n := set.Next(); n.ID != "A.1.2" {
		t.Fatal(n)
	}
	// The next write removes the stale line without archiving it twice.
	update(t, s, func(*Set) error { return nil })
	if strings.Contains(read(t, s.ActivePath), `"A.1.1"`) {
		t.Fatal(read(t, s.ActivePath))
	}
	if n := strings.Count(read(t, s.DonePath), `"A.1.1"`); n != 1 {
		t.Fatal("archived", n, "times")
	}
	// Same with a pending line: Next must not hand it out.
	s2 := newStore(t, seed, `{"id":"A.1.1","title":"choose session library","completed":"2024-01-21","commit":"abc"}`+"\n")
	if n := mustLoad(t, s2).Next(); n.ID != "A.1.2" {
		t.Fatal(n)
	}
}

func TestActiveFileReplacedAtomically(t *testing.T) {
	s := newStore(t, seed, "")
	update(t, s, func(set *Set) error { _, err := set.Add("", "x", ""); return err })
	entries, _ := os.ReadDir(filepath.Dir(s.ActivePath))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "tasks.jsonl tasks.jsonl.lock" {
		t.Fatal("temp files left behind:", names)
	}
}

func TestConcurrentUpdates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.jsonl")
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := Open(path) // a Store of its own, as another process would
			for i := 0; i < 50; i++ {
				err := s.Update(func(set *Set) error {
					_, err := set.Add(fmt.Sprintf("W%d_%d", w, i), "task", "")
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	set, err := Open(path).Load()
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 400 {
		t.Fatalf("got %d tasks, want 400", set.Len())
	}
}

func TestValidateChanges(t *testing.T) {
	s := newStore(t, seed, `{"id":"C","title":"old","status":"complete","leaf":false,"completed":"2024-01-21"}
{"id":"C.1","title":"old","completed":"2024-01-21"}
`)
	before := mustLoad(t, s)
	// An agent edits the files by hand.
	write(t, s.ActivePath, strings.Replace(seed, `{"id":"B","title":"write tests","status":"pending","leaf":true}`+"\n", "", 1)+
		`{"id":"A.3","title":"ok","status":"pending","leaf":true}
{"id":"A.4","title":"claimed","status":"active","leaf":true}
{"id":"C.1","title":"reuse","status":"pending","leaf":true}
{"id":"C.2","title":"under done","status":"pending","leaf":true}
`)
	write(t, s.DonePath, `{"id":"C","title":"old","status":"complete","leaf":false,"completed":"2024-01-22"}
`)
	after := mustLoad(t, s)
	err := ValidateChanges(before, after)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, strings.TrimPrefix(p.String(), filepath.Dir(s.ActivePath)+"/"))
	}
	want := []string{
		"tasks.jsonl:7: task A.4: a new task must start as \"pending\"",
		"tasks.jsonl:8: task C.1: id C.1 is already used by a completed task",
		"tasks.jsonl:9: task C.2: parent C is already complete",
		"tasks.jsonl: task B: was deleted without being completed (it was on line 6)",
		"tasks-done.jsonl:1: task C: was changed in the archive",
		"tasks-done.jsonl: task C.1: was removed from the archive",
	}
	if len(got) != len(want) {
		t.Fatalf("got\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("got  %s\nwant %s", got[i], want[i])
		}
	}
	if err := ValidateChanges(before, before); err != nil {
		t.Fatal(err)
	}
}

// The flags that judge a task are loosened only by a person: an agent's
// edit that removes "critical" or sets "allow_test_changes" (on a task of
// before or a new one) is a problem; making a task stricter is not.
func TestValidateChangesJudgingFlags(t *testing.T) {
	s := newStore(t, strings.Replace(seed, `{"id":"A.2","title":"add login endpoint","status":"pending","leaf":true}`,
		`{"id":"A.2","title":"add login endpoint","status":"pending","leaf":true,"critical":true}`, 1), "")
	before := mustLoad(t, s)
	edited := strings.NewReplacer(
		`"leaf":true,"critical":true}`, `"leaf":true}`,
		`{"id":"B","title":"write tests","status":"pending","leaf":true}`, `{"id":"B","title":"write tests","status":"pending","leaf":true,"allow_test_changes":true}`,
		`{"id":"A.1.1","title":"choose session library","status":"pending","leaf":true}`, `{"id":"A.1.1","title":"choose session library","status":"pending","leaf":true,"critical":true}`,
	).Replace(seed) + `{"id":"A.3","title":"new","status":"pending","leaf":true,"allow_test_changes":true}` + "\n"
	write(t, s.ActivePath, edited)
	err := ValidateChanges(before, mustLoad(t, s))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("no problem found: %v", err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.ID+": "+p.Msg)
	}
	want := []string{
		`A.2: "critical" was removed; only a person changes how a task is judged`,
		`B: "allow_test_changes" was set; only a person lets a task lose tests`,
		`A.3: a new task cannot set "allow_test_changes"; only a person lets a task lose tests`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTaskJSON(t *testing.T) {
	set := mustLoad(t, newStore(t, seed, ""))
	b, _ := set.Get("B")
	out, err := json.Marshal(b)
	if err != nil || string(out) != `{"id":"B","title":"write tests","status":"pending","leaf":true}` {
		t.Fatal(string(out), err)
	}
}

// Encoded lines read back as the same task.
func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add("A.1", "title \"q\" \\ <b> \x01\n", "why", "abc")
	f.Fuzz(func(t *testing.T, id, title, reason, commit string) {
		in := &Task{ID: id, Title: title, Status: StatusBlocked, Reason: reason, Commit: commit}
		if !utf8.ValidString(id + title + reason + commit) {
			t.Skip("encoding/json writes invalid UTF-8 as U+FFFD")
		}
		line := appendTask(nil, in)
		if !json.Valid(line) {
			t.Fatalf("invalid JSON %s", line)
		}
		out, err := parseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if out.core() != in.core() {
			t.Fatalf("%+v != %+v", out.core(), in.core())
		}
	})
}

// What a write normalises, as the README says: CRLF line ends become LF,
// blank lines are dropped, a line missing "leaf" gets it; every other
// line's bytes (spacing, key order, unknown fields) are kept.
func TestWriteNormalisesLineEndsAndBlankLines(t *testing.T) {
	in := "{\"id\":\"A\",  \"title\":\"a\", \"status\":\"pending\",\"leaf\":true, \"owner\":\"me\"}\r\n" +
		"\r\n" +
		"   \n" +
		"{\"id\":\"B\",\"title\":\"b\",\"status\":\"pending\"}\r\n"
	s := newStore(t, in, "")
	update(t, s, func(set *Set) error { _, err := set.Add("", "c", ""); return err })
	want := "{\"id\":\"A\",  \"title\":\"a\", \"status\":\"pending\",\"leaf\":true, \"owner\":\"me\"}\n" +
		"{\"id\":\"B\",\"title\":\"b\",\"status\":\"pending\",\"leaf\":true}\n" +
		"{\"id\":\"C\",\"title\":\"c\",\"status\":\"pending\",\"leaf\":true}\n"
	if got := read(t, s.ActivePath); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}
