package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	okA  = `{"id":"A","title":"a","status":"pending","leaf":true}`
	okB  = `{"id":"B","title":"b","status":"pending","leaf":true}`
	okX  = `{"id":"X","title":"x","status":"complete","leaf":true,"completed":"2026-01-01T00:00:00Z"}`
	bomS = "\xef\xbb\xbf"
)

// Every malformed line is refused with its file, line, task (when known)
// and rule, by Load and by Update alike, and Update writes nothing.
func TestInputErrors(t *testing.T) {
	long := strings.Repeat("A", maxIDLen+1)
	cases := []struct {
		name, active, done string
		want               []string // whole problems, the directory cut off
	}{
		{"BOM at file start", bomS + okA + "\n" + okB + "\n", "",
			[]string{"tasks.jsonl:1: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM"}},
		{"BOM on the only line", bomS + okA + "\n", "",
			[]string{"tasks.jsonl:1: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM"}},
		{"BOM on the only line, no newline", bomS + okA, "",
			[]string{"tasks.jsonl:1: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM"}},
		{"BOM on a later line", okA + "\n" + bomS + okB + "\n", "",
			[]string{"tasks.jsonl:2: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM"}},
		{"BOM after CRLF and spaces", okA + "\r\n  " + bomS + okB + "\r\n", "",
			[]string{"tasks.jsonl:2: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM"}},
		{"BOM in the archive", okA + "\n", bomS + okX + "\n",
			[]string{"tasks-done.jsonl:1: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM"}},
		{"invalid UTF-8 in a title", okA + "\n" + `{"id":"B","title":"caf` + "\xe9" + `","status":"pending","leaf":true}` + "\n", "",
			[]string{"tasks.jsonl:2: invalid UTF-8 (byte 0xe9 at column 23): save the file as UTF-8"}},
		{"invalid UTF-8 after other characters", `{"id":"A","title":"é ` + "\xff" + `"}` + "\n", "",
			[]string{"tasks.jsonl:1: invalid UTF-8 (byte 0xff at column 22): save the file as UTF-8"}},
		{"invalid UTF-8 on the last line", okA + "\n" + `{"id":"B","title":"b","note":"` + "\xc3\x28" + `"}`, "",
			[]string{"tasks.jsonl:2: invalid UTF-8 (byte 0xc3 at column 31): save the file as UTF-8"}},
		{"invalid UTF-8 in a key", `{"id":"A","title":"a","` + "\xfe" + `":1}` + "\n", "",
			[]string{"tasks.jsonl:1: invalid UTF-8 (byte 0xfe at column 24): save the file as UTF-8"}},
		{"invalid UTF-8 in the archive", okA + "\n", `{"id":"X","title":"` + "\x80" + `"}` + "\n" + okX + "\n",
			[]string{"tasks-done.jsonl:1: invalid UTF-8 (byte 0x80 at column 20): save the file as UTF-8"}},
		{"repeated status", `{"id":"A","title":"a","status":"pending","status":"complete","leaf":true}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "status" appears twice`}},
		{"repeated leaf", `{"id":"A","title":"a","status":"pending","leaf":true,"leaf":false}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "leaf" appears twice`}},
		{"repeated id", `{"id":"A","id":"B","title":"a"}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "id" appears twice`}},
		{"repeated unknown field", okA + "\n" + `{"id":"B","title":"b","note":1,"note":2}` + "\n", "",
			[]string{`tasks.jsonl:2: task B: field "note" appears twice`}},
		{"repeated key written with an escape", `{"id":"A","title":"a","st\u0061tus":"pending","status":"blocked"}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "status" appears twice`}},
		{"repeated key in the archive", okA + "\n", `{"id":"X","title":"x","commit":"a","commit":"b"}` + "\n",
			[]string{`tasks-done.jsonl:1: task X: field "commit" appears twice`}},
		{"Status in another case", `{"id":"A","title":"a","status":"pending","leaf":true,"Status":"complete"}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "Status": field names are case-sensitive, write "status"`}},
		{"ID in upper case", `{"ID":"A","title":"a"}` + "\n", "",
			[]string{`tasks.jsonl:1: field "ID": field names are case-sensitive, write "id"`}},
		{"LEAF in upper case", `{"id":"A","title":"a","LEAF":false}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "LEAF": field names are case-sensitive, write "leaf"`}},
		{"agent setting in another case", `{"id":"A","title":"a","Critical":true}` + "\n", "",
			[]string{`tasks.jsonl:1: task A: field "Critical": field names are case-sensitive, write "critical"`}},
		{"case variant in the archive", okA + "\n", `{"id":"X","Commit":"abc"}` + "\n",
			[]string{`tasks-done.jsonl:1: task X: field "Commit": field names are case-sensitive, write "commit"`}},
		{"id too long", `{"id":"` + long + `","title":"a"}` + "\n", "",
			[]string{`tasks.jsonl:1: task "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"…: id is 129 characters long; ids are at most 128 (they become branch and file names)`}},
		{"child id too long", `{"id":"A","title":"a","leaf":false}` + "\n" + `{"id":"A.` + long[:maxIDLen-1] + `","title":"a"}` + "\n", "",
			[]string{`tasks.jsonl:2: task "A.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"…: id is 129 characters long; ids are at most 128 (they become branch and file names)`}},
		{"id with a newline", `{"id":"A\n","title":"a"}` + "\n", "",
			[]string{`tasks.jsonl:1: task "A\n": invalid id "A\n": use segments of letters, digits, _ or - separated by single dots (A, A.1, A.1.2)`}},
		{"wrong type in the archive", okA + "\n", `{"id":"X","commit":7}` + "\n",
			[]string{`tasks-done.jsonl:1: task X: field "commit" must be a string`}},
		{"every bad line at once", bomS + okA + "\n" + `{"id":"B","title":"` + "\xff" + `"}` + "\n" + `{"id":"C","title":"c","leaf":true,"leaf":true}` + "\n", "",
			[]string{
				"tasks.jsonl:1: a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM",
				"tasks.jsonl:2: invalid UTF-8 (byte 0xff at column 20): save the file as UTF-8",
				`tasks.jsonl:3: task C: field "leaf" appears twice`,
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, c.active, c.done)
			check := func(what string, err error) {
				t.Helper()
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("%s: want *ValidationError, got %v", what, err)
				}
				var got []string
				for _, p := range ve.Problems {
					got = append(got, strings.TrimPrefix(p.String(), filepath.Dir(s.ActivePath)+string(filepath.Separator)))
				}
				if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
					t.Fatalf("%s:\n got %q\nwant %q", what, got, c.want)
				}
			}
			_, err := s.Load()
			check("Load", err)
			check("Update", s.Update(func(set *Set) error { _, err := set.Add("", "new", ""); return err }))
			if read(t, s.ActivePath) != c.active || read(t, s.DonePath) != c.done {
				t.Fatal("a refused Update changed a file")
			}
		})
	}
}

// What the checks must not refuse: an id of exactly MaxIDLen characters,
// unknown fields whose names are not a known field's in another case, and
// null as an absent field. Unchanged lines keep their bytes.
func TestInputAccepted(t *testing.T) {
	id128 := strings.Repeat("B", maxIDLen)
	in := `{"id":"A","title":"café ☕","status":"pending","leaf":true,"Owner":"me","titles":["x"],"STATUS_NOTE":"n"}` + "\n" +
		`{"id":"` + id128 + `","title":"b","status":null,"leaf":null}` + "\n"
	s := newStore(t, in, "")
	set := mustLoad(t, s)
	b, ok := set.Get(id128)
	if !ok || b.Status != StatusPending || !b.Leaf {
		t.Fatalf("%+v", b)
	}
	update(t, s, func(set *Set) error { _, err := set.Claim("A"); return err })
	want := `{"id":"A","title":"café ☕","status":"active","leaf":true,"Owner":"me","titles":["x"],"STATUS_NOTE":"n"}` + "\n" +
		`{"id":"` + id128 + `","title":"b","status":"pending","leaf":true}` + "\n"
	if got := read(t, s.ActivePath); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	a, _ := mustLoad(t, s).Get("A")
	if v, ok := a.Field("Owner"); !ok || string(v) != `"me"` {
		t.Fatalf("Owner: %s %v", v, ok)
	}
}

// What a command gives the store is checked like a line read: an id too
// long, a title or reason that is not UTF-8 (it would be written as
// U+FFFD).
func TestInputFromCommands(t *testing.T) {
	cases := []struct {
		name string
		fn   func(*Set) error
		want string
	}{
		{"add a long id", func(set *Set) error {
			_, err := set.Add(strings.Repeat("A", maxIDLen+1), "t", "")
			return err
		}, "task id is 129 characters long; ids are at most 128 (they become branch and file names)"},
		{"add a bad id", func(set *Set) error { _, err := set.Add("A..1", "t", ""); return err },
			`invalid task id "A..1": use segments`},
		{"a child id grows too long", func(set *Set) error {
			long := strings.Repeat("C", maxIDLen-1)
			if _, err := set.Add(long, "c", ""); err != nil {
				return err
			}
			_, err := set.Add("", "child", long)
			return err
		}, "tasks.jsonl: task \"CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC\"…: id is 129 characters long"},
		{"a title that is not UTF-8", func(set *Set) error { _, err := set.Add("", "caf\xe9", ""); return err },
			`tasks.jsonl: task C: field "title" is not valid UTF-8`},
		{"a reason that is not UTF-8", func(set *Set) error { return set.Block("B", "no \xff") },
			`tasks.jsonl:2: task B: field "reason" is not valid UTF-8`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := okA + "\n" + okB + "\n"
			s := newStore(t, in, "")
			err := s.Update(c.fn)
			if err == nil {
				t.Fatal("Update accepted it")
			}
			got := strings.ReplaceAll(err.Error(), filepath.Dir(s.ActivePath)+string(filepath.Separator), "")
			if !strings.Contains(got, c.want) {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			if read(t, s.ActivePath) != in {
				t.Fatal("file changed")
			}
		})
	}
	// One more: a child id of exactly 128 characters is fine.
	s := newStore(t, okA+"\n", "")
	update(t, s, func(set *Set) error {
		if _, err := set.Add(strings.Repeat("C", maxIDLen-2), "c", ""); err != nil {
			return err
		}
		_, err := set.Add("", "child", strings.Repeat("C", maxIDLen-2))
		return err
	})
}

// MergeEdits keys lines by their exact "id" field, as Load reads them.
func TestMergeEditsKeysByExactID(t *testing.T) {
	sent := []byte(`{"ID":"A","title":"a"}` + "\n")
	got := []byte(`{"ID":"A","title":"a changed"}` + "\n")
	cur := []byte(`{"ID":"A","title":"a"}` + "\n" + `{"id":"A","title":"person's"}` + "\n")
	merged, conflicts := MergeEdits(sent, got, cur)
	want := `{"id":"A","title":"person's"}` + "\n" + `{"ID":"A","title":"a changed"}` + "\n"
	if string(merged) != want || len(conflicts) != 0 {
		t.Fatalf("merged\n%s conflicts %v", merged, conflicts)
	}
}

// The line reader on any input: no panic; a line it accepts is one JSON
// object of valid UTF-8 with unique, exactly named keys, read as
// encoding/json reads those keys; a refused line is refused for the right
// reason; an accepted task re-encodes to a line that reads back the same.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		okA, okX,
		`{"id":"A","title":"a","status":"pending","leaf":true,"owner":{"n":[1,2]}}`,
		bomS + okA,
		`{"id":"A","title":"caf` + "\xe9" + `"}`,
		`{"id":"A","title":"a","status":"pending","status":"active"}`,
		`{"id":"A","Title":"a"}`,
		`{"id":"A","title":"a","leaf":null,"status":null}`,
		`{"id":"A","title":"\ud800 \u00e9 \" \\"}`,
		`["A"]`, `"A"`, `{"id":"A","tit`, `{}`, `{"id":7}`, `{"critical":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || bytes.IndexByte(line, '\n') >= 0 {
			t.Skip("eachLine hands over trimmed lines without newlines")
		}
		task, err := parseLine(line)
		var se *syntaxError
		switch {
		case bytes.HasPrefix(line, bom):
			if err != errBOM {
				t.Fatalf("BOM line: %v", err)
			}
			return
		case !json.Valid(line):
			if !errors.As(err, &se) || task != nil {
				t.Fatalf("invalid JSON: %v", err)
			}
			return
		case !utf8.Valid(line):
			if err == nil || !strings.HasPrefix(err.Error(), "invalid UTF-8 (byte 0x") || task != nil {
				t.Fatalf("invalid UTF-8: %v", err)
			}
			return
		case line[0] != '{':
			if err != errNotObject {
				t.Fatalf("not an object: %v", err)
			}
			return
		}
		if task == nil {
			t.Fatalf("an object line gave no task: %v", err)
		}
		var m map[string]json.RawMessage
		if e := json.Unmarshal(line, &m); e != nil {
			t.Fatal(e)
		}
		fs := fields(line)
		var keys []string
		for _, k := range topKeys(nil, line) {
			keys = append(keys, string(k))
		}
		for i, f := range fs {
			if i >= len(keys) || keys[i] != f.key {
				t.Fatalf("topKeys %q, json.Decoder finds %v", keys, fs)
			}
		}
		if len(keys) != len(fs) {
			t.Fatalf("topKeys %q, json.Decoder finds %v", keys, fs)
		}
		if err == nil {
			if len(fs) != len(m) {
				t.Fatalf("accepted a repeated key: %d fields, %d distinct", len(fs), len(m))
			}
			for k := range m {
				for _, known := range knownFields {
					if k != known && strings.EqualFold(k, known) {
						t.Fatalf("accepted %q for %q", k, known)
					}
				}
			}
			want := &Task{Status: StatusPending, Leaf: true}
			for k, v := range map[string]any{"id": &want.ID, "title": &want.Title, "status": &want.Status, "leaf": &want.Leaf,
				"reason": &want.Reason, "completed": &want.Completed, "commit": &want.Commit} {
				if raw, ok := m[k]; ok {
					if e := json.Unmarshal(raw, v); e != nil {
						t.Fatalf("accepted %s=%s: %v", k, raw, e)
					}
				}
			}
			if task.core() != want.core() {
				t.Fatalf("read %+v, encoding/json reads %+v", task.core(), want.core())
			}
			// A changed task re-encodes to a line that reads back the same,
			// unknown fields included.
			task.Title += "!"
			again, err := parseLine(appendTask(nil, task))
			if err != nil {
				t.Fatalf("re-encoded line refused: %v", err)
			}
			if again.core() != task.core() {
				t.Fatalf("re-encoded %+v, read back %+v", task.core(), again.core())
			}
			for _, f := range fs {
				switch f.key {
				case "id", "title", "status", "leaf", "reason", "completed", "commit":
					continue // re-encoded from the task, compared above
				}
				if v, ok := again.Field(f.key); !ok || !bytes.Equal(v, f.val) {
					t.Fatalf("field %q lost or changed: %s", f.key, v)
				}
			}
			return
		}
		if errors.As(err, &se) {
			t.Fatalf("valid JSON called invalid: %v", err)
		}
		dup := len(fs) != len(m)
		variant := false
		for _, f := range fs {
			for _, known := range knownFields {
				variant = variant || f.key != known && strings.EqualFold(f.key, known)
			}
		}
		if !dup && !variant && !strings.Contains(err.Error(), "must be") {
			t.Fatalf("refused for no reason: %v", err)
		}
	})
}
