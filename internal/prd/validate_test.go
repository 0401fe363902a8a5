package prd

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []Problem
	}{
		{
			name: "valid",
			src:  `{"user_stories": [{"id": "A", "title": "a", "priority": 999, "complexity": 5}]}`,
		},
		{
			name: "no stories",
			src:  `{"userStories": []}`,
			want: []Problem{{"", ruleNoStories, "userStories is empty; there is nothing to work on"}},
		},
		{
			name: "missing id",
			src:  `{"user_stories": [{"id": "A", "title": "a"}, {"title": "b"}]}`,
			want: []Problem{{"", ruleMissingID, "user_stories[1]: missing id"}},
		},
		{
			name: "duplicate id",
			src:  `{"user_stories": [{"id": "A", "title": "a"}, {"id": "B", "title": "b"}, {"id": "A", "title": "c"}]}`,
			want: []Problem{{"A", ruleDuplicateID, "duplicate id (user_stories[2] repeats user_stories[0])"}},
		},
		{
			name: "missing title",
			src:  `{"user_stories": [{"id": "A", "title": "  "}]}`,
			want: []Problem{{"A", ruleMissingTitle, "missing title"}},
		},
		{
			name: "unknown dependency",
			src:  `{"user_stories": [{"id": "US-003", "title": "a", "depends_on": ["US-009"]}]}`,
			want: []Problem{{"US-003", ruleUnknownDependency, `unknown dependency "US-009" (depends_on)`}},
		},
		{
			name: "unknown dependency camel",
			src:  `{"userStories": [{"id": "US-003", "title": "a", "dependsOn": ["US-009"]}]}`,
			want: []Problem{{"US-003", ruleUnknownDependency, `unknown dependency "US-009" (dependsOn)`}},
		},
		{
			name: "self dependency",
			src:  `{"user_stories": [{"id": "A", "title": "a", "depends_on": ["A"]}]}`,
			want: []Problem{{"A", ruleSelfDependency, "depends on itself (depends_on)"}},
		},
		{
			name: "two-story cycle",
			src: `{"user_stories": [{"id": "US-001", "title": "a", "depends_on": ["US-002"]},
				{"id": "US-002", "title": "b", "depends_on": ["US-001"]}]}`,
			want: []Problem{{"US-001", ruleDependencyCycle, "dependency cycle US-001 -> US-002 -> US-001"}},
		},
		{
			name: "cycle found from outside starts at earliest story",
			src: `{"user_stories": [{"id": "X", "title": "x", "depends_on": ["C"]},
				{"id": "A", "title": "a", "depends_on": ["B"]},
				{"id": "B", "title": "b", "depends_on": ["C"]},
				{"id": "C", "title": "c", "depends_on": ["A"]}]}`,
			want: []Problem{{"A", ruleDependencyCycle, "dependency cycle A -> B -> C -> A"}},
		},
		{
			name: "priority range",
			src: `{"user_stories": [{"id": "A", "title": "a", "priority": -1}, {"id": "B", "title": "b", "priority": 1000},
				{"id": "C", "title": "c", "priority": 0}, {"id": "D", "title": "d", "priority": null}]}`,
			want: []Problem{
				{"A", rulePriorityRange, "priority -1 out of range; use 1 (highest) to 999, or leave it out"},
				{"B", rulePriorityRange, "priority 1000 out of range; use 1 (highest) to 999, or leave it out"},
				{"C", rulePriorityRange, "priority 0 out of range; use 1 (highest) to 999, or leave it out"},
			},
		},
		{
			name: "complexity range",
			src:  `{"user_stories": [{"id": "A", "title": "a", "complexity": 6}, {"id": "B", "title": "b", "complexity": 0}]}`,
			want: []Problem{
				{"A", ruleComplexityRange, "complexity 6 out of range; use 1 to 5, or leave it out"},
				{"B", ruleComplexityRange, "complexity 0 out of range; use 1 to 5, or leave it out"},
			},
		},
		{
			name: "id length",
			src: `{"user_stories": [{"id": "` + strings.Repeat("é", maxIDLength) + `", "title": "a"},
				{"id": "` + strings.Repeat("x", maxIDLength+1) + `", "title": "b"}]}`,
			want: []Problem{{strings.Repeat("x", maxIDLength+1), ruleIDTooLong, "id is 129 characters long; ids are at most 128 (files of the run are named after them)"}},
		},
		{
			name: "invisible characters in ids",
			src: `{"user_stories": [{"id": "\ufeffA", "title": "a"}, {"id": "B\u202e", "title": "b"},
				{"id": "C\u2028D", "title": "c"}, {"id": "dé ✓ 1", "title": "d"}]}`,
			want: []Problem{
				{"", ruleBadID, `user_stories[0]: id "\ufeffA" holds a byte order mark (U+FEFF); ids are single-line names of visible characters`},
				{"", ruleBadID, `user_stories[1]: id "B\u202e" holds an invisible character (U+202E); ids are single-line names of visible characters`},
				{"", ruleBadID, `user_stories[2]: id "C\u2028D" holds a line break or control character; ids are single-line names of visible characters`},
			},
		},
		{
			name: "unknown agent",
			src:  `{"user_stories": [{"id": "A", "title": "a", "agent": "claude"}, {"id": "B", "title": "b", "agent": "gpt"}]}`,
			want: []Problem{{"B", ruleUnknownAgent, `agent "gpt" is not one ralph knows (amp, claude, cmd, codex, copilot, gemini, native, opencode, scripted)`}},
		},
		{
			name: "blank check",
			src:  `{"userStories": [{"id": "A", "title": "a", "checks": ["make test", " "]}]}`,
			want: []Problem{{"A", ruleBlankCheck, "checks[1] is blank; a blank command passes every time: give the command or remove it"}},
		},
		{
			name: "all problems collected",
			src: `{"user_stories": [{"id": "A", "depends_on": ["A", "Q"], "priority": 0},
				{"id": "A", "title": "b"}, {"title": "c", "complexity": 9}]}`,
			want: []Problem{
				{"A", ruleMissingTitle, "missing title"},
				{"A", ruleSelfDependency, "depends on itself (depends_on)"},
				{"A", ruleUnknownDependency, `unknown dependency "Q" (depends_on)`},
				{"A", rulePriorityRange, "priority 0 out of range; use 1 (highest) to 999, or leave it out"},
				{"A", ruleDuplicateID, "duplicate id (user_stories[1] repeats user_stories[0])"},
				{"", ruleMissingID, "user_stories[2]: missing id"},
				{"", ruleComplexityRange, "user_stories[2]: complexity 9 out of range; use 1 to 5, or leave it out"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustParse(t, tt.src).Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want *ValidationError", err)
			}
			if ve.File != "prd.json" {
				t.Errorf("File = %q", ve.File)
			}
			if !reflect.DeepEqual(ve.Problems, tt.want) {
				t.Errorf("Problems:\n got %q\nwant %q", ve.Problems, tt.want)
			}
		})
	}
}

func TestValidationErrorText(t *testing.T) {
	err := mustParse(t, `{"user_stories": [{"id": "US-003", "title": "t", "depends_on": ["US-009"]}, {"title": "x"}]}`).Validate()
	want := "prd.json: story US-003: unknown dependency \"US-009\" (depends_on)\n" +
		"prd.json: user_stories[1]: missing id"
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
}

// A nil *ValidationError stored in an error interface would not be nil.
func TestValidateReturnsUntypedNil(t *testing.T) {
	if err := Template("p", "f").Validate(); err != nil {
		t.Fatalf("Validate = %#v", err)
	}
}

func TestValidateBranchNameAndControlIDs(t *testing.T) {
	p, err := Parse("p.json", []byte(`{"branch_name": "feature/../x", "user_stories": [{"id": "A\nRalph-Story: B", "title": "t"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 || ve.Problems[0].Rule != ruleBranchName || ve.Problems[1].Rule != ruleBadID {
		t.Fatalf("problems %v", err)
	}
	if !strings.Contains(err.Error(), `branch_name "feature/../x" is not a valid git branch name: it must not contain '..'`) {
		t.Fatalf("message %q", err)
	}
}

func TestParseInvalidUTF8(t *testing.T) {
	_, err := Parse("p.json", []byte("{\"user_stories\": [\n  {\"id\": \"A\", \"title\": \"caf\xe9\"}]}"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(pe.Msg, "invalid UTF-8 (byte 0xe9)") {
		t.Fatalf("err %v", err)
	}
}

// A long id is shown shortened wherever a message names it.
func TestValidateLongIDShownShort(t *testing.T) {
	long := strings.Repeat("S", 100_000)
	err := mustParse(t, `{"user_stories": [{"id": "`+long+`"}, {"id": "B", "title": "b", "depends_on": ["`+long+`x"]}]}`).Validate()
	want := "prd.json: story " + strings.Repeat("S", 32) + "…: id is 100000 characters long; ids are at most 128 (files of the run are named after them)\n" +
		"prd.json: story " + strings.Repeat("S", 32) + "…: missing title\n" +
		"prd.json: story B: unknown dependency \"" + strings.Repeat("S", 32) + "…\" (depends_on)"
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
}

// Every name git refuses as a branch, validation refuses as branch_name.
func TestValidateBranchNameAsGit(t *testing.T) {
	for _, name := range []string{"HEAD", "-x", "@", "a b", strings.Repeat("b", 251)} {
		p := mustParse(t, `{"branchName": "`+name+`", "userStories": [{"id": "A", "title": "a"}]}`)
		var ve *ValidationError
		if err := p.Validate(); !errors.As(err, &ve) || ve.Problems[0].Rule != ruleBranchName || !strings.Contains(err.Error(), "prd.json: branchName ") {
			t.Errorf("branchName %q: %v", name, err)
		}
	}
}

// A blank gate is no gate.
func TestBlankGateIsNoGate(t *testing.T) {
	q := QualityChecks{Typecheck: "", Lint: " \t", Test: "go test ./..."}
	if gs := q.Gates(); len(gs) != 1 || gs[0].Name != "test" {
		t.Errorf("Gates = %v", gs)
	}
}

// TestProtectedGlobs: the PRD's protected globs are checked like its
// other fields, each bad one named with its place.
func TestProtectedGlobs(t *testing.T) {
	p, err := Parse("prd.json", []byte(`{"project":"p","branch_name":"ralph/p","protected":["testdata/**","golden/*.json","[a-","../up","", "a\\b"],
"user_stories":[{"id":"S-1","title":"t","priority":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	if err == nil {
		t.Fatal("bad globs validated")
	}
	for _, want := range []string{`protected[2] "[a-": not a valid glob`, `protected[3] "../up": leaves the repository`, `protected[4] "": an empty glob`, `protected[5] "a\\b": use / between folders`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "protected[0]") || strings.Contains(err.Error(), "protected[1]") {
		t.Errorf("good globs refused: %v", err)
	}
	// Written back, the field stays as it was.
	p.Stories[0].Passes = true
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"protected":["testdata/**","golden/*.json"`) {
		t.Errorf("protected changed on write-back:\n%s", b)
	}
}
