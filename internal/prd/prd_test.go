package prd

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, src string) *PRD {
	t.Helper()
	p, err := Parse("prd.json", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseExamples(t *testing.T) {
	tests := []struct {
		file     string
		format   Format
		project  string
		branch   string
		stories  int
		gates    int
		lastDeps []string
	}{
		{"prd-snake.json", formatSnake, "todo-api", "feature/task-priorities", 4, 4, []string{"US-002", "US-003"}},
		{"prd-camel.json", formatCamel, "notes-app", "ralph/tag-filter", 2, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p, err := Load(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if p.Format != tt.format || p.Project != tt.project || p.BranchName != tt.branch {
				t.Errorf("got format %v project %q branch %q", p.Format, p.Project, p.BranchName)
			}
			if len(p.Stories) != tt.stories {
				t.Fatalf("got %d stories, want %d", len(p.Stories), tt.stories)
			}
			if g := p.QualityChecks.Gates(); len(g) != tt.gates {
				t.Errorf("got %d gates, want %d", len(g), tt.gates)
			}
			last := p.Stories[len(p.Stories)-1]
			if !reflect.DeepEqual(last.DependsOn, tt.lastDeps) {
				t.Errorf("last story deps = %q, want %q", last.DependsOn, tt.lastDeps)
			}
			if len(last.AcceptanceCriteria) == 0 || last.Title == "" || last.Priority == 0 {
				t.Errorf("last story not fully read: %+v", last)
			}
			if len(p.PassedInFile()) != 0 {
				t.Errorf("PassedInFile = %v, want none", p.PassedInFile())
			}
		})
	}
}

// An untouched write-back of a hand-written file must not churn it.
func TestWriteBackUnchangedIsIdentical(t *testing.T) {
	for _, file := range []string{"prd-snake.json", "prd-camel.json"} {
		t.Run(file, func(t *testing.T) {
			data := readExample(t, file)
			p := mustParse(t, string(data))
			out, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != string(data) {
				t.Errorf("write-back differs:\n%s", out)
			}
		})
	}
}

func TestMarkPassedWriteBack(t *testing.T) {
	tests := []struct {
		file, id string
		wantLine string
	}{
		{"prd-snake.json", "US-003", `      "passes": true,`},
		{"prd-camel.json", "US-002", `      "passes": true,`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data := readExample(t, tt.file)
			p := mustParse(t, string(data))
			if p.MarkPassed("US-999") {
				t.Error("MarkPassed of unknown id returned true")
			}
			if !p.MarkPassed(tt.id) {
				t.Fatal("MarkPassed returned false")
			}
			out, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			before := strings.Split(string(data), "\n")
			after := strings.Split(string(out), "\n")
			if len(before) != len(after) {
				t.Fatalf("line count changed: %d -> %d\n%s", len(before), len(after), out)
			}
			var changed []string
			for i := range before {
				if before[i] != after[i] {
					changed = append(changed, after[i])
				}
			}
			if len(changed) != 1 || changed[0] != tt.wantLine {
				t.Errorf("changed lines = %q, want only %q", changed, tt.wantLine)
			}
			q := mustParse(t, string(out))
			if got := q.PassedInFile(); !reflect.DeepEqual(got, map[string]bool{tt.id: true}) {
				t.Errorf("PassedInFile after write-back = %v", got)
			}
			if q.Format != p.Format {
				t.Errorf("format changed to %v", q.Format)
			}
		})
	}
}

func TestUnknownFieldsKept(t *testing.T) {
	tests := []struct {
		name string
		src  string
		mark string
		// want are substrings that must appear in this order in the output.
		want []string
	}{
		{
			name: "snake",
			src: `{"owner": {"team": "core", "n": 1.50}, "project": "p", "user_stories": [
				{"estimate": 3, "id": "US-001", "title": "t", "tags": ["a", "b"], "passes": false}
			], "quality_checks": {"test": "go test ./...", "lint": "gofmt -l ."}, "zz": null}`,
			mark: "US-001",
			want: []string{
				`"owner": {`, `"team": "core"`, `"n": 1.50`, `"project": "p"`, `"user_stories": [`,
				`"estimate": 3,`, `"id": "US-001"`, `"title": "t"`, `"tags": ["a", "b"]`, `"passes": true`,
				`"quality_checks": {`, `"test": "go test ./..."`, `"lint": "gofmt -l ."`, `"zz": null`,
			},
		},
		{
			name: "camel without passes, with snake alias",
			src: `{"project": "p", "userStories": [
				{"id": "US-001", "title": "t", "x-ui": {"color": "red"}},
				{"id": "US-002", "title": "u", "depends_on": ["US-001"], "priority": null}
			], "branchName": "b"}`,
			mark: "US-001",
			want: []string{
				`"userStories": [`, `"id": "US-001"`, `"x-ui": {`, `"color": "red"`, `"passes": true`,
				`"id": "US-002"`, `"depends_on": ["US-001"]`, `"priority": null`, `"branchName": "b"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.src)
			p.MarkPassed(tt.mark)
			out, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			rest := string(out)
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("missing (or out of order) %q in\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			q := mustParse(t, string(out))
			if q.Format != p.Format {
				t.Errorf("format %v -> %v", p.Format, q.Format)
			}
			if !reflect.DeepEqual(public(p), public(q)) {
				t.Errorf("model changed on round trip:\n%+v\n%+v", public(p), public(q))
			}
			again, _ := q.Marshal()
			if string(again) != string(out) {
				t.Errorf("second write-back differs:\n%s\n%s", out, again)
			}
		})
	}
}

// The "passes" in the file must not decide selection: the harness does.
func TestSelection(t *testing.T) {
	const src = `{"user_stories": [
		{"id": "A", "title": "a", "priority": 2},
		{"id": "B", "title": "b"},
		{"id": "C", "title": "c", "priority": 1, "depends_on": ["A"]},
		{"id": "D", "title": "d", "priority": 2, "passes": true},
		{"id": "E", "title": "e", "priority": 1},
		{"id": "F", "title": "f"}
	]}`
	set := func(ids ...string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	tests := []struct {
		name            string
		passed, exclude map[string]bool
		want            []string
	}{
		{"priority then file order, zero last", nil, nil, []string{"E", "A", "D", "B", "F"}},
		{"dependency met", set("A"), nil, []string{"C", "E", "D", "B", "F"}},
		{"exclude", set("A"), set("C", "E"), []string{"D", "B", "F"}},
		{"passes in file ignored", set("D"), nil, []string{"E", "A", "B", "F"}},
		{"all done", set("A", "B", "C", "D", "E", "F"), nil, nil},
		{"only blocked left", set("B", "D", "E", "F"), set("A"), nil},
	}
	p := mustParse(t, src)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range p.ReadyStories(tt.passed, tt.exclude) {
				got = append(got, s.ID)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadyStories = %v, want %v", got, tt.want)
			}
			next := p.NextStory(tt.passed, tt.exclude)
			switch {
			case len(tt.want) == 0 && next != nil:
				t.Errorf("NextStory = %s, want nil", next.ID)
			case len(tt.want) > 0 && (next == nil || next.ID != tt.want[0]):
				t.Errorf("NextStory = %v, want %s", next, tt.want[0])
			}
		})
	}
}

func TestNextStoryAliasesModel(t *testing.T) {
	p := mustParse(t, `{"userStories": [{"id": "US-001", "title": "t"}]}`)
	p.NextStory(nil, nil).Notes = "edited"
	if p.Story("US-001").Notes != "edited" {
		t.Error("NextStory did not return a pointer into the model")
	}
	if p.Story("nope") != nil {
		t.Error("Story of unknown id is not nil")
	}
}

func TestStages(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want [][]string
	}{
		{
			name: "diamond",
			src: `{"user_stories": [
				{"id": "D", "title": "d", "depends_on": ["B", "C"]},
				{"id": "B", "title": "b", "priority": 2, "depends_on": ["A"]},
				{"id": "C", "title": "c", "priority": 1, "depends_on": ["A"]},
				{"id": "A", "title": "a"}
			]}`,
			want: [][]string{{"A"}, {"C", "B"}, {"D"}},
		},
		{
			name: "level is longest path",
			src: `{"user_stories": [
				{"id": "A", "title": "a"},
				{"id": "B", "title": "b", "depends_on": ["A"]},
				{"id": "C", "title": "c", "depends_on": ["A", "B"]},
				{"id": "X", "title": "x"}
			]}`,
			want: [][]string{{"A", "X"}, {"B"}, {"C"}},
		},
		{
			name: "cycle and unknown dependency left out",
			src: `{"user_stories": [
				{"id": "A", "title": "a"},
				{"id": "B", "title": "b", "depends_on": ["C"]},
				{"id": "C", "title": "c", "depends_on": ["B"]},
				{"id": "D", "title": "d", "depends_on": ["C"]},
				{"id": "E", "title": "e", "depends_on": ["nope"]},
				{"id": "F", "title": "f", "depends_on": ["A"]}
			]}`,
			want: [][]string{{"A"}, {"F"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]string
			for _, st := range mustParse(t, tt.src).Levels() {
				var ids []string
				for _, s := range st {
					ids = append(ids, s.ID)
				}
				got = append(got, ids)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Stages = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	p := mustParse(t, `{"user_stories": [{"id": "A", "title": "a"}, {"id": "B", "title": "b"}]}`)
	tests := []struct {
		passed   map[string]bool
		count    int
		complete bool
	}{
		{nil, 0, false},
		{map[string]bool{"A": true, "gone": true}, 1, false},
		{map[string]bool{"A": true, "B": true}, 2, true},
	}
	for _, tt := range tests {
		if got := p.PassedCount(tt.passed); got != tt.count {
			t.Errorf("PassedCount(%v) = %d, want %d", tt.passed, got, tt.count)
		}
		if got := p.IsComplete(tt.passed); got != tt.complete {
			t.Errorf("IsComplete(%v) = %v, want %v", tt.passed, got, tt.complete)
		}
	}
}

func TestGates(t *testing.T) {
	tests := []struct {
		q    QualityChecks
		want []Gate
	}{
		{QualityChecks{}, nil},
		{QualityChecks{Build: "b", Typecheck: "t"}, []Gate{{"typecheck", "t"}, {"build", "b"}}},
		{QualityChecks{"t", "l", "x", "b"}, []Gate{{"typecheck", "t"}, {"lint", "l"}, {"test", "x"}, {"build", "b"}}},
	}
	for _, tt := range tests {
		if got := tt.q.Gates(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Gates(%+v) = %v, want %v", tt.q, got, tt.want)
		}
	}
}

func TestTemplate(t *testing.T) {
	now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600)) }
	defer func() { now = time.Now }()
	p := Template("todo-api", "Task Priorities!")
	if err := p.Validate(); err != nil {
		t.Fatalf("template does not validate: %v", err)
	}
	if p.Format != formatSnake || p.BranchName != "feature/task-priorities" || p.Version != "1.0" ||
		p.CreatedAt != "2026-01-02T02:04:05Z" || p.UpdatedAt != p.CreatedAt {
		t.Errorf("unexpected template: %+v", p)
	}
	if s := p.Story("US-001"); s == nil || s.Passes {
		t.Errorf("US-001 missing or passed: %+v", s)
	}
	out, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"user_stories"`, `"depends_on": []`, `"technical_requirements": []`,
		`"quality_checks"`, `"typecheck": ""`, `"passes": false`, `"created_at"`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("template output lacks %s:\n%s", key, out)
		}
	}
	q, err := Parse("prd.json", out)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Validate(); err != nil {
		t.Errorf("written template does not validate: %v", err)
	}
	if !reflect.DeepEqual(public(p), public(q)) {
		t.Errorf("template changed on round trip")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Task priorities":         "task-priorities",
		"  Tag / filter 2.0 ":     "tag-filter-2-0",
		"Ünïcode":                 "n-code",
		"!!!":                     "prd",
		strings.Repeat("ab ", 40): strings.Repeat("ab-", 19) + "ab",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prd.json")
	if err := os.WriteFile(path, []byte(`{"user_stories": [{"id": "A", "title": "a", "depends_on": ["Z"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	var ve *ValidationError
	if p != nil || !errors.As(err, &ve) || ve.File != path {
		t.Fatalf("Load = %v, %v; want nil and a ValidationError for %s", p, err, path)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of missing file: %v", err)
	}
}

// public strips what the model keeps only for write-back, leaving what a
// caller can see.
func public(p *PRD) PRD {
	c := *p
	c.name, c.src = "", nil
	c.Stories = nil
	for _, s := range p.Stories {
		s.src = nil
		s.priorityGiven, s.complexityGiven = false, false
		c.Stories = append(c.Stories, s)
	}
	return c
}

// In a parallel run, among equal priorities the story more stories wait on
// (directly or not) goes first; priority still comes first.
func TestReadyStoriesUnblockingFirst(t *testing.T) {
	p := mustParse(t, `{"user_stories": [
		{"id": "A", "title": "a", "priority": 1},
		{"id": "B", "title": "b", "priority": 1},
		{"id": "C", "title": "c", "priority": 1},
		{"id": "D", "title": "d", "priority": 1, "depends_on": ["B"]},
		{"id": "E", "title": "e", "priority": 1, "depends_on": ["D"]},
		{"id": "F", "title": "f", "priority": 1, "depends_on": ["C"]},
		{"id": "G", "title": "g", "priority": 2}
	]}`)
	waiting := p.Dependents()
	if waiting["B"] != 2 || waiting["C"] != 1 || waiting["A"] != 0 || waiting["E"] != 0 {
		t.Fatalf("Dependents = %v", waiting)
	}
	var got []string
	for _, s := range p.ReadyStoriesUnblockingFirst(nil, nil, waiting) {
		got = append(got, s.ID)
	}
	if strings.Join(got, " ") != "B C A G" {
		t.Fatalf("order %v, want B C A G", got)
	}
	// Sequential selection keeps file order among equals.
	if n := p.NextStory(nil, nil); n.ID != "A" {
		t.Fatalf("NextStory = %s, want A", n.ID)
	}
}

// A write-back changes only what changed: multi-line arrays, four-space
// indentation and CRLF line ends stay as written; a camelCase story that
// had no "passes" gets one line, in its own spacing.
func TestWriteBackKeepsTheFilesLayout(t *testing.T) {
	src := "{\n" +
		"    \"project\": \"p\",\n" +
		"    \"userStories\": [\n" +
		"        {\n" +
		"            \"id\": \"US-1\",\n" +
		"            \"title\": \"one\",\n" +
		"            \"acceptanceCriteria\": [\n" +
		"                \"first\",\n" +
		"                \"second\"\n" +
		"            ],\n" +
		"            \"passes\": false\n" +
		"        },\n" +
		"        {\n" +
		"            \"id\": \"US-2\",\n" +
		"            \"title\": \"two\",\n" +
		"            \"dependsOn\": [\n" +
		"                \"US-1\"\n" +
		"            ]\n" +
		"        }\n" +
		"    ]\n" +
		"}\n"
	want := strings.Replace(src, "\"passes\": false", "\"passes\": true", 1)
	want = strings.Replace(want, "                \"US-1\"\n            ]\n", "                \"US-1\"\n            ],\n            \"passes\": true\n", 1)
	for _, nl := range []string{"\n", "\r\n"} {
		name := map[string]string{"\n": "LF", "\r\n": "CRLF"}[nl]
		t.Run(name, func(t *testing.T) {
			in := strings.ReplaceAll(src, "\n", nl)
			p := mustParse(t, in)
			if p.Format != formatCamel {
				t.Fatalf("format %v", p.Format)
			}
			p.MarkPassed("US-1")
			p.MarkPassed("US-2")
			out, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if got, w := string(out), strings.ReplaceAll(want, "\n", nl); got != w {
				t.Errorf("write-back:\n%s\nwant:\n%s", got, w)
			}
			q := mustParse(t, string(out))
			if !reflect.DeepEqual(q.PassedInFile(), map[string]bool{"US-1": true, "US-2": true}) {
				t.Errorf("passed after write-back = %v", q.PassedInFile())
			}
		})
	}
	// Stories reordered or added: the canonical layout, same model.
	p := mustParse(t, src)
	p.Stories[0], p.Stories[1] = p.Stories[1], p.Stories[0]
	out, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	q := mustParse(t, string(out))
	if q.Stories[0].ID != "US-2" || !reflect.DeepEqual(q.Stories[1].AcceptanceCriteria, []string{"first", "second"}) {
		t.Errorf("reordered write-back lost the model:\n%s", out)
	}
}

// Equal (the write-back's "is this story as the file has it") looks at
// every field of a story but its source, and storyObject reads and writes
// every one: changing any of them, by reflection, makes the copy unequal
// and changes a field of storyObject.
func TestStoryEqual(t *testing.T) {
	typ := reflect.TypeOf(Story{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Name == "src" {
			continue
		}
		a := Story{ID: "S-1", AcceptanceCriteria: []string{"a"}}
		b := a.clone()
		v := reflect.ValueOf(&b).Elem().Field(i)
		v = reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem() // unexported fields too
		switch v.Kind() {
		case reflect.String:
			v.SetString("changed")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int:
			v.SetInt(7)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"changed"}))
		default:
			t.Fatalf("field %s of kind %s: teach this test (and storyObject) about it", f.Name, v.Kind())
		}
		if a.Equal(&b) {
			t.Errorf("Story.Equal does not compare %s", f.Name)
		}
		inFile := false
		for _, fd := range storyObject.fields {
			inFile = inFile || !same(fd.val(&a), fd.val(&b))
		}
		if !inFile {
			t.Errorf("storyObject has no field for %s: it would be neither read nor written", f.Name)
		}
	}
}

// NextStory is the first of ReadyStories, found without sorting them all.
func TestNextStoryIsTheFirstReady(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for trial := 0; trial < 500; trial++ {
		p := &PRD{}
		n := 1 + rng.IntN(12)
		for i := 0; i < n; i++ {
			s := Story{ID: fmt.Sprintf("S-%d", i), Title: "t", Priority: rng.IntN(4)}
			if i > 0 && rng.IntN(3) == 0 {
				s.DependsOn = []string{fmt.Sprintf("S-%d", rng.IntN(i))}
			}
			p.Stories = append(p.Stories, s)
		}
		passed, exclude := map[string]bool{}, map[string]bool{}
		for i := 0; i < n; i++ {
			switch rng.IntN(4) {
			case 0:
				passed[fmt.Sprintf("S-%d", i)] = true
			case 1:
				exclude[fmt.Sprintf("S-%d", i)] = true
			}
		}
		ready, next := p.ReadyStories(passed, exclude), p.NextStory(passed, exclude)
		if len(ready) == 0 && next != nil || len(ready) > 0 && next != ready[0] {
			t.Fatalf("trial %d: NextStory = %v, ReadyStories starts %v", trial, next, ready)
		}
	}
}

// A PRD built in Go, every field set, is written in each format's
// canonical layout and read back as the same model: each layout names
// every field.
func TestCanonicalRoundTrip(t *testing.T) {
	for _, f := range []Format{formatSnake, formatCamel} {
		p := &PRD{Format: f, Project: "p", Feature: "f", BranchName: "b", Version: "1", Description: "d",
			TechnicalRequirements: []string{"go"}, QualityChecks: QualityChecks{"t", "l", "x", "b"}, CreatedAt: "c", UpdatedAt: "u",
			Stories: []Story{{ID: "A", Title: "a", Description: "d", AcceptanceCriteria: []string{"x", "[1, 2]"}, Passes: true,
				Priority: 1, DependsOn: []string{"B"}, Complexity: 2, Notes: "n", Checks: []string{"c"}, AllowGateChanges: true, AllowTestChanges: true,
				Agent: "ag", Model: "m", Critical: true}, {ID: "B", Title: "b"}}}
		out, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		q := mustParse(t, string(out))
		if q.Format != f || !reflect.DeepEqual(public(p), public(q)) {
			t.Errorf("%v: round trip changed the model:\n%s", f, out)
		}
		if !strings.Contains(string(out), `"acceptance`) || !strings.Contains(string(out), `["x", "[1, 2]"]`) {
			t.Errorf("%v: lists not on one line:\n%s", f, out)
		}
	}
}
