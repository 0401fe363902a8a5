package prd

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"empty", "  \n", `prd.json: empty file; a prd.json is a JSON object with a "user_stories" or "userStories" array`},
		{"syntax: stray brace", "{\n  \"user_stories\": [\n    {\"id\": \"A\",}\n  ]\n}",
			"prd.json:3:16: invalid character '}' looking for beginning of object key string"},
		{"syntax: column counts characters", "{\"project\": \"héllo\" \"x\"}",
			"prd.json:1:21: invalid character '\"' after object key:value pair"},
		{"syntax: truncated", "{\"user_stories\": [\n", "prd.json:2:1: unexpected end of JSON input"},
		{"syntax: trailing data", "{\"user_stories\": []}\n}", "prd.json:2:1: invalid character '}' after top-level value"},
		{"syntax: after BOM", "\xef\xbb\xbf{,}", "prd.json:1:2: invalid character ',' looking for beginning of object key string"},
		{"second BOM", "\xef\xbb\xbf\xef\xbb\xbf{}", "prd.json:1:1: a byte order mark (U+FEFF) where JSON is expected; only the file's first bytes may be one: remove it"},
		{"BOM after a line", "\n\xef\xbb\xbf{}", "prd.json:2:1: a byte order mark (U+FEFF) where JSON is expected; only the file's first bytes may be one: remove it"},
		{"BOM between values", "{\"user_stories\": [],\xef\xbb\xbf \"x\": 1}", "prd.json:1:21: a byte order mark (U+FEFF) where JSON is expected; only the file's first bytes may be one: remove it"},
		{"UTF-16", "\xff\xfe{\x00}\x00", "prd.json:1:1: the file starts with a UTF-16 byte order mark: save it as UTF-8"},
		{"long id named short", `{"user_stories": [{"id": "` + strings.Repeat("x", 200) + `", "passes": 1}]}`,
			`prd.json:1:240: user_stories[0] (` + strings.Repeat("x", 32) + `…): "passes" must be true or false, got number 1`},
		{"top level array", " [1]", "prd.json:1:2: top level must be a JSON object, got array"},
		{"no stories key", `{"project": "p", "stories": []}`,
			`prd.json: no "user_stories" (snake_case) or "userStories" (camelCase) array; not a prd.json?`},
		{"both formats", "{\"user_stories\": [],\n \"userStories\": []}",
			`prd.json:2:2: "user_stories" and "userStories" are the same field; keep one`},
		{"duplicate key", "{\"user_stories\": [],\n\n  \"x\": 1, \"x\": 2}", `prd.json:3:11: duplicate key "x" (first on line 3)`},
		{"priority as string", "{\"user_stories\": [\n  {\"id\": \"A\", \"title\": \"t\"},\n  {\"priority\": \"high\", \"id\": \"US-002\"}\n]}",
			`prd.json:3:16: user_stories[1] (US-002): "priority" must be a whole number, got string "high"`},
		{"fractional complexity", `{"userStories": [{"complexity": 2.5}]}`,
			`prd.json:1:33: userStories[0]: "complexity" must be a whole number between -2147483648 and 2147483647, got number 2.5`},
		{"huge priority", `{"userStories": [{"priority": 1e40}]}`,
			`prd.json:1:31: userStories[0]: "priority" must be a whole number between -2147483648 and 2147483647, got number 1e40`},
		{"passes as string", `{"userStories": [{"id": "A", "passes": "yes"}]}`,
			`prd.json:1:40: userStories[0] (A): "passes" must be true or false, got string "yes"`},
		{"dependency not a list", `{"user_stories": [{"id": "A", "depends_on": "B"}]}`,
			`prd.json:1:45: user_stories[0] (A): "depends_on" must be an array of strings, got string "B"`},
		{"dependency element", `{"user_stories": [{"id": "A", "depends_on": ["B", 7]}]}`,
			`prd.json:1:51: user_stories[0] (A): "depends_on"[1] must be a string, got number 7`},
		{"id as number", `{"user_stories": [{"id": 1}]}`,
			`prd.json:1:26: user_stories[0]: "id" must be a string, got number 1`},
		{"story not an object", `{"user_stories": ["US-001"]}`,
			`prd.json:1:19: user_stories[0] must be a story object, got string "US-001"`},
		{"stories not an array", `{"user_stories": {}}`,
			`prd.json:1:18: "user_stories" must be an array of story objects, got object`},
		{"two spellings in a story", `{"userStories": [{"id": "A", "dependsOn": [], "depends_on": []}]}`,
			`prd.json:1:47: userStories[0] (A): "dependsOn" and "depends_on" are the same field; keep one`},
		{"quality check type", `{"user_stories": [], "quality_checks": {"test": ["go", "test"]}}`,
			`prd.json:1:49: "quality_checks.test" must be a string, got array`},
		{"quality checks type", `{"user_stories": [], "quality_checks": "make"}`,
			`prd.json:1:40: "quality_checks" must be an object with typecheck, lint, test and build commands, got string "make"`},
		{"top-level field type", `{"user_stories": [], "branch_name": false}`,
			`prd.json:1:37: "branch_name" must be a string, got boolean false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("prd.json", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p)
			}
			if p != nil {
				t.Errorf("Parse returned a PRD with an error")
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "prd.json" {
				t.Errorf("not a *ParseError for prd.json: %#v", err)
			}
			if pe != nil && pe.Line > 0 {
				src := strings.TrimPrefix(tt.src, "\xef\xbb\xbf")
				if l, c := position([]byte(src), pe.Offset); l != pe.Line || c != pe.Column {
					t.Errorf("Offset %d is %d:%d, error says %d:%d", pe.Offset, l, c, pe.Line, pe.Column)
				}
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(*PRD) bool
	}{
		{"nulls are absent", `{"user_stories": [{"id": "A", "title": "t", "priority": null, "depends_on": null, "passes": null}], "quality_checks": null}`,
			func(p *PRD) bool { s := p.Stories[0]; return s.Priority == 0 && s.DependsOn == nil && !s.Passes }},
		{"whole number written as float", `{"user_stories": [{"id": "A", "priority": 2.0, "complexity": 3e0}]}`,
			func(p *PRD) bool { return p.Stories[0].Priority == 2 && p.Stories[0].Complexity == 3 }},
		{"BOM", "\xef\xbb\xbf{\"userStories\": []}", func(p *PRD) bool { return p.Format == formatCamel }},
		{"camel spelling in snake file", `{"user_stories": [{"id": "A", "acceptanceCriteria": ["x"]}], "qualityChecks": {"lint": "l"}}`,
			func(p *PRD) bool {
				return p.Format == formatSnake && p.Stories[0].AcceptanceCriteria[0] == "x" && p.QualityChecks.Lint == "l"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.src)
			if !tt.check(p) {
				t.Errorf("unexpected model: %+v", p)
			}
		})
	}
}

// Every field of the wrong type is reported in one parse, in file order,
// each with its line, story and field; ParseAll still returns what it
// could read.
func TestParseReportsEveryTypeError(t *testing.T) {
	data := []byte(`{"project": "p", "branch_name": 7, "user_stories": [
  {"id": "S-1", "title": "one", "passes": "no"},
  {"id": "S-2", "title": "two", "priority": "high", "acceptance_criteria": "works"},
  "not a story",
  {"id": "S-3", "title": "three"}
], "quality_checks": {"test": 5}}
`)
	p, err := ParseAll("prd.json", data)
	var te TypeErrors
	if !errors.As(err, &te) {
		t.Fatalf("want TypeErrors, got %v", err)
	}
	want := []string{
		`prd.json:1:33: "branch_name" must be a string, got number 7`,
		`prd.json:2:43: user_stories[0] (S-1): "passes" must be true or false, got string "no"`,
		`prd.json:3:45: user_stories[1] (S-2): "priority" must be a whole number, got string "high"`,
		`prd.json:3:76: user_stories[1] (S-2): "acceptance_criteria" must be an array of strings, got string "works"`,
		`prd.json:4:3: user_stories[2] must be a story object, got string "not a story"`,
		`prd.json:6:31: "quality_checks.test" must be a string, got number 5`,
	}
	if len(te) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(te), len(want), err)
	}
	for i, w := range want {
		if te[i].Error() != w {
			t.Errorf("error %d:\n got %s\nwant %s", i, te[i].Error(), w)
		}
	}
	if p == nil || len(p.Stories) != 3 || p.Stories[2].ID != "S-3" {
		t.Fatalf("the readable stories: %+v", p)
	}
	if _, err := Parse("prd.json", data); err == nil || strings.Count(err.Error(), "\n") != len(want)-1 {
		t.Fatalf("Parse names every type error: %v", err)
	}
}
