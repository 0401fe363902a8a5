package prd

import (
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	doc, err := Parse("prd.json", []byte(`{"project": "p", "user_stories": [
 {"id": "S-1", "title": "ok", "complexity": 2, "acceptance_criteria": ["GET /health returns 200", "search answers in under 200 ms"]},
 {"id": "S-2", "title": "big", "complexity": 3, "acceptance_criteria": ["the form has a submit button"]},
 {"id": "S-3", "title": "vague", "acceptance_criteria": ["Search is fast", "the page works well", "errors are handled properly"]},
 {"id": "S-4", "title": "none"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(doc.Lint(), "\n")
	for _, want := range []string{
		"S-2: complexity 3 is above 2",
		`S-3: acceptance criterion "Search is fast" has no objective check ("fast" with no number)`,
		`S-3: acceptance criterion "the page works well" has no objective check ("works well" with no number)`,
		`S-3: acceptance criterion "errors are handled properly" has no objective check ("properly" with no number)`,
		"S-4: no acceptance criteria",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Lint lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "S-1") {
		t.Errorf("S-1 is fine, but:\n%s", got)
	}
	if n := len(doc.Lint()); n != 5 {
		t.Errorf("%d findings, want 5:\n%s", n, got)
	}
}

func TestCanonicalWritesPasses(t *testing.T) {
	doc, err := Parse("prd.json", []byte(`{"project": "p", "x-extra": 1, "user_stories": [{"id": "S-1", "title": "one"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if ids := doc.WithoutPasses(); len(ids) != 1 {
		t.Fatalf("WithoutPasses = %v", ids)
	}
	doc.Canonical()
	b, err := doc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("prd.json", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if ids := again.WithoutPasses(); len(ids) != 0 || !strings.Contains(string(b), `"passes": false`) {
		t.Errorf("canonical output lacks passes:\n%s", b)
	}
}
