package tasks

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReparseMatchesParse: after random edits of a few lines of
// tasks.jsonl (a status, a title, a line added, removed, blanked, padded,
// broken or put out of order, at the start, the middle or the end), the
// Set made from the previous Load by parsing only the changed lines is
// record for record what a parse of the whole file makes, and a file a
// parse rejects or must sort is never handed out by reparse.
func TestReparseMatchesParse(t *testing.T) {
	reparsed, total := 0, 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		s := newStore(t, "", "{\"id\":\"Z\",\"title\":\"z\",\"status\":\"complete\",\"leaf\":true}\n")
		lines := []string{
			`{"id":"A","title":"a","status":"pending","leaf":false}`,
			`{"id":"A.1","title":"a1","status":"pending","leaf":true,"owner":"me"}`,
			`{"id":"A.2",  "title":"a2", "status":"active", "leaf":true}`,
			`{"id":"\u0042","title":"escaped id","status":"pending","leaf":true}`,
		}
		used := map[int]bool{}
		for i := 0; i < 30; i++ {
			n := 10 + rng.IntN(900)
			if !used[n] {
				used[n] = true
				lines = append(lines, taskLine(n, "pending", "t"))
			}
		}
		slices.SortStableFunc(lines[4:], func(a, b string) int { return strings.Compare(a, b) })
		join := func(ls []string) []byte {
			out := strings.Join(ls, "\n")
			if len(ls) > 0 && rng.IntN(8) > 0 {
				out += "\n"
			}
			return []byte(out)
		}
		data := join(lines)
		done := []byte("{\"id\":\"Z\",\"title\":\"z\",\"status\":\"complete\",\"leaf\":true}\n")
		if _, err := s.LoadBytes(data, done); err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 60; step++ {
			next := slices.Clone(lines)
			for k := 1 + rng.IntN(3); k > 0; k-- {
				next = editLines(rng, next, used)
			}
			nd := join(next)
			prev := s.cache
			// Read as Load reads it: with the prefix and suffix shared
			// with the last Load's bytes, found while reading.
			if err := os.WriteFile(s.ActivePath, nd, 0o644); err != nil {
				t.Fatal(err)
			}
			nd, sh, err := readChanged(s.ActivePath, prev.active)
			if err != nil {
				t.Fatal(err)
			}
			got := s.reparse(prev, nd, done, sh)
			want, err := s.parse(nd, done)
			total++
			switch {
			case err != nil || want.changed:
				if got != nil {
					t.Fatalf("seed %d step %d: reparse handed out a Set for a file a parse rejects or sorts (%v)\n%s", seed, step, err, nd)
				}
				continue // the next edit starts from the last good file
			case got != nil:
				reparsed++
				if d := diffSets(got, want); d != "" {
					t.Fatalf("seed %d step %d: reparse differs from a parse: %s\nbefore:\n%s\nafter:\n%s", seed, step, d, prev.active, nd)
				}
				if g, w := fmt.Sprint(ValidateChanges(prev.set, got)), fmt.Sprint(ValidateChanges(prev.set, want)); g != w {
					t.Fatalf("seed %d step %d: the changes found by the span differ from a full walk:\n%s\nfull:\n%s", seed, step, g, w)
				}
				if got.from != prev.set.gen {
					t.Fatalf("seed %d step %d: the reparsed Set does not name its origin", seed, step)
				}
				if &got.data[0] != &nd[0] {
					t.Fatalf("seed %d step %d: the Set points at the old bytes", seed, step)
				}
			default:
				got = want
			}
			s.cache = &loadCache{active: nd, done: done, set: got}
			lines = next
		}
	}
	// The test means something only if reparse did most of the work.
	t.Logf("reparse made %d of %d Sets", reparsed, total)
	if reparsed < total/2 {
		t.Fatalf("reparse made %d of %d Sets", reparsed, total)
	}
}

func taskLine(n int, status, title string) string {
	return fmt.Sprintf(`{"id":"T%04d","title":%q,"status":%q,"leaf":true}`, n, title, status)
}

// editLines makes one random edit of a task file's lines.
func editLines(rng *rand.Rand, ls []string, used map[int]bool) []string {
	i := rng.IntN(len(ls) + 1)
	at := min(i, len(ls)-1)
	switch rng.IntN(11) {
	case 0, 1: // a status
		if at >= 0 && strings.HasPrefix(ls[at], `{"id":"T`) {
			var n int
			fmt.Sscanf(ls[at], `{"id":"T%04d"`, &n)
			ls[at] = taskLine(n, []string{"pending", "active", "blocked", "complete"}[rng.IntN(4)], strings.Repeat("x", rng.IntN(20)))
		}
	case 2, 3: // a new task in its place
		n := 10 + rng.IntN(900)
		if !used[n] {
			used[n] = true
			line := taskLine(n, "pending", "new")
			j, _ := slices.BinarySearchFunc(ls[4:], line, strings.Compare)
			ls = slices.Insert(ls, 4+j, line)
		}
	case 4: // a task removed (a parent or a subtask too)
		if at >= 0 {
			ls = slices.Delete(ls, at, at+1)
		}
	case 5: // a blank or padded line
		ls = slices.Insert(ls, i, strings.Repeat(" ", rng.IntN(3)))
	case 6:
		if at >= 0 {
			ls[at] = "  " + ls[at] + " "
		}
	case 7: // a broken line
		if at >= 0 && rng.IntN(3) == 0 {
			ls[at] = ls[at][:len(ls[at])/2]
		}
	case 8: // out of order
		if at >= 5 {
			ls[at-1], ls[at] = ls[at], ls[at-1]
		}
	case 10: // a subtask under a task that was a leaf
		if at >= 0 && strings.HasPrefix(ls[at], `{"id":"T`) {
			id := ls[at][len(`{"id":"`) : strings.IndexByte(ls[at][len(`{"id":"`):], '"')+len(`{"id":"`)]
			ls = slices.Insert(ls, at+1, `{"id":"`+id+`.1","title":"sub","status":"pending","leaf":true}`)
		}
	case 9: // a line at the end
		n := 1000 + rng.IntN(9000)
		if !used[n] {
			used[n] = true
			ls = append(ls, taskLine(n, "pending", "last"))
		}
	}
	return ls
}

// The changed lines can break a task outside them: a container whose last
// subtask is deleted, a leaf that gets a subtask. reparse checks the whole
// trees the change touches and leaves such a file to the full parse.
func TestReparseChecksTheTreesItTouches(t *testing.T) {
	const base = `{"id":"A","title":"a","status":"pending","leaf":false}
{"id":"A.1","title":"a1","status":"pending","leaf":true}
{"id":"B","title":"b","status":"pending","leaf":true}
{"id":"C","title":"c","status":"pending","leaf":true}
`
	for name, after := range map[string]string{
		"the last subtask deleted": strings.Replace(base, `{"id":"A.1","title":"a1","status":"pending","leaf":true}`+"\n", "", 1),
		"a subtask under a leaf":   strings.Replace(base, `{"id":"C"`, `{"id":"B.1","title":"b1","status":"pending","leaf":true}`+"\n"+`{"id":"C"`, 1),
	} {
		s := newStore(t, "", "")
		if _, err := s.LoadBytes([]byte(base), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.parse([]byte(after), nil); err == nil {
			t.Fatalf("%s: a parse accepts it", name)
		}
		if s.reparse(s.cache, []byte(after), nil, nil) != nil {
			t.Errorf("%s: reparse accepted a file a parse rejects", name)
		}
	}
}

// readChanged returns a changed file's bytes and the prefix and suffix
// they share with the old ones, found while reading, the same as comparing
// afterwards; an unchanged file reads as the old bytes themselves.
func TestReadChangedFindsWhatIsShared(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	path := filepath.Join(t.TempDir(), "f")
	for step := 0; step < 300; step++ {
		n := rng.IntN(3 << 20)
		if step%3 == 0 {
			n = rng.IntN(2000)
		}
		was := make([]byte, n)
		for i := range was {
			was[i] = byte('a' + rng.IntN(3))
		}
		data := slices.Clone(was)
		for k := rng.IntN(4); k > 0 && len(data) > 0; k-- {
			at := rng.IntN(len(data))
			switch rng.IntN(3) {
			case 0:
				data[at] = 'z'
			case 1:
				data = slices.Insert(data, at, bytes.Repeat([]byte{'y'}, 1+rng.IntN(300))...)
			case 2:
				data = slices.Delete(data, at, min(len(data), at+1+rng.IntN(300)))
			}
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, sh, err := readChanged(path, was)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("step %d: read %d bytes (%v), the file has %d", step, len(got), err, len(data))
		}
		if bytes.Equal(was, data) {
			if len(was) > 0 && &got[0] != &was[0] {
				t.Fatalf("step %d: an unchanged file was read into new bytes", step)
			}
			continue
		}
		if sh == nil {
			t.Fatalf("step %d: no prefix and suffix for a changed file", step)
		}
		if p, s := commonPrefix(was, data), commonSuffix(was, data); sh.prefix != p || sh.suffix != s {
			t.Fatalf("step %d (%d → %d bytes): prefix %d suffix %d, comparing gives %d and %d", step, len(was), len(data), sh.prefix, sh.suffix, p, s)
		}
	}
}
