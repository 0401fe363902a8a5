package prd

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and every file that parses and validates
// survives a write-back: untouched, it is the file itself; after a story
// passes, only that story's object changes, Marshal -> Parse gives the same
// model and format, and a second Marshal is byte-identical (write-back is
// idempotent).
func FuzzParse(f *testing.F) {
	for _, name := range []string{"prd-snake.json", "prd-camel.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"userStories": [{"id": "A", "title": "a", "x": {"y": [1, {"z": null}]}}], "w": "\u2028<&>"}`,
		`{"user_stories": [{"id": "A", "title": "a", "priority": null, "depends_on": null}], "quality_checks": {"test": "t", "q": 1}}`,
		`{"user_stories": [{"id": "A", "title": "a", "priority": 2.0e0, "passes": true}, {"id": "B", "title": "b", "dependsOn": ["A"]}]}`,
		"\xef\xbb\xbf{\"userStories\": [{\"id\": \"\\u00e9\", \"title\": \"\xff\"}]}",
		"{\r\n\t\"userStories\": [\r\n\t\t{\"id\": \"A\", \"title\": \"t\"},\r\n\t\t{\"id\": \"B\", \"title\": \"u\", \"passes\": false}\r\n\t]\r\n}\r\n",
		`{"user_stories": [}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("prd.json", data)
		if err != nil {
			if p != nil {
				t.Fatal("PRD returned with an error")
			}
			return
		}
		// Selection must not panic on invalid input either.
		p.Levels()
		p.NextStory(p.PassedInFile(), nil)
		if p.Validate() != nil {
			return
		}
		// An untouched write-back is the file as it was.
		if same, _ := p.Marshal(); string(same) != string(bytes.TrimPrefix(data, bom)) {
			t.Fatalf("untouched write-back differs:\n%s", same)
		}
		// The write-back after a story passes edits the file in place:
		// nothing before or after that story's object changes.
		var before, after string
		if n := len(p.Stories); n > 0 {
			s := &p.Stories[n-1]
			before, after = p.src.doc[:s.src.obj.Index], p.src.doc[end(s.src.obj):]
			p.MarkPassed(s.ID)
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if !strings.HasPrefix(string(out), before) || !strings.HasSuffix(string(out), after) {
			t.Fatalf("passing the last story changed more than that story:\n%s", out)
		}
		q, err := Parse("prd.json", out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("re-validate: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(public(p), public(q)) {
			t.Fatalf("model changed:\n%#v\n%#v\n%s", public(p), public(q), out)
		}
		again, err := q.Marshal()
		if err != nil || string(again) != string(out) {
			t.Fatalf("second write-back differs (%v):\n%s\n%s", err, out, again)
		}
	})
}
