package prd

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, and every file that parses and validates
// survives a write-back: Marshal -> Parse gives the same model and format,
// and a second Marshal is byte-identical (write-back is idempotent).
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
		// The write-back after a story passes edits the file in place.
		if len(p.Stories) > 0 {
			p.MarkPassed(p.Stories[len(p.Stories)-1].ID)
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
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
