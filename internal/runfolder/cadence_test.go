package runfolder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScheme(t *testing.T) {
	for _, c := range []struct {
		in   string
		w, r int
		bad  bool
	}{
		{in: "W5R", w: 5, r: 1}, {in: "W2R1", w: 2, r: 1}, {in: "W10R3", w: 10, r: 3},
		{in: "W0R", bad: true}, {in: "R5W", bad: true}, {in: "W5", bad: true}, {in: "w5r", bad: true}, {in: "W5R0", bad: true}, {in: "", bad: true},
	} {
		w, r, err := parseScheme(c.in)
		if c.bad != (err != nil) || !c.bad && (w != c.w || r != c.r) {
			t.Errorf("ParseScheme(%q) = %d, %d, %v", c.in, w, r, err)
		}
	}
}

func TestReadOrchestration(t *testing.T) {
	dir := t.TempDir()
	if o, err := ReadOrchestration(dir); o != nil || err != nil {
		t.Fatalf("no file: %v, %v", o, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, Orchestration), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{}`)
	if o, err := ReadOrchestration(dir); err != nil || o.Scheme != defaultScheme || o.Workers != 5 || o.Reviewers != 1 {
		t.Fatalf("empty file: %+v, %v", o, err)
	}
	write(`{"scheme": "W3R2", "loop_settings": {"force_steering": true}}`)
	if o, err := ReadOrchestration(dir); err != nil || o.Workers != 3 || o.Reviewers != 2 || !o.LoopSettings.ForceSteering {
		t.Fatalf("W3R2: %+v, %v", o, err)
	}
	for in, want := range map[string]string{
		"{\n  \"scheme\": 5\n}":        `line 2, column 13: "scheme" must be string, not number`,
		"{\n  \"schema\": \"W5R\"\n}":  `unknown field "schema"`,
		"{\n  \"scheme\": \"W5R\",\n}": "line 3, column 1: invalid character '}'",
		`{"scheme": "every five"}`:     `scheme "every five": want W<n>R<m>`,
	} {
		write(in)
		_, err := ReadOrchestration(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), Orchestration) {
			t.Errorf("%q: got %v, want %q naming the file", in, err, want)
		}
	}
}
