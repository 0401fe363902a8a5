package plan

import (
	"strings"
	"testing"
)

const ralphex = `# Greet

## Overview
Some words.

## Validation Commands
` + "```bash" + `
go test ./...
# a comment
golangci-lint run
` + "```" + `

### Task 1: hello
Write it.
- [ ] hello.txt
- [x] says hello

### Task 2: bye
- [x] bye.txt
- [X] says bye

## Notes
- [ ] not a task box
`

func TestParseRalphex(t *testing.T) {
	// A box in another section is no task's (and never ticked).
	src := ralphex
	p, err := Parse("p.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.Flat || len(p.Items) != 2 || p.Items[0].ID != "task-1" || p.Items[0].Title != "hello" || p.Items[0].Body != "Write it." {
		t.Fatalf("items %+v", p.Items)
	}
	if p.Items[0].Done || !p.Items[1].Done {
		t.Fatalf("done: %v %v", p.Items[0].Done, p.Items[1].Done)
	}
	if len(p.Gates) != 2 || p.Gates[0].Command != "go test ./..." || p.Gates[1].Command != "golangci-lint run" {
		t.Fatalf("gates %+v", p.Gates)
	}
	out := string(p.Tick(func(id string) bool { return id == "task-1" }))
	if strings.Count(out, "[ ]") != 1 || out == src {
		t.Fatalf("tick:\n%s", out)
	}
	if got := string(p.Tick(func(string) bool { return false })); got != src {
		t.Fatalf("no tick changed the file:\n%s", got)
	}
	doc, err := p.PRD("ralph/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if doc.QualityChecks.Test != "go test ./..." || doc.QualityChecks.Build != "golangci-lint run" || !doc.Stories[1].Passes || doc.Stories[0].Passes {
		t.Fatalf("prd %+v", doc)
	}
}

func TestParseFlatCRLF(t *testing.T) {
	src := "# Fix plan\r\n- [ ] one\r\n  detail\r\n  - [ ] sub check\r\n- [x] two\r\ntrailing words\r\n"
	p, err := Parse("fix_plan.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Flat || len(p.Items) != 2 || p.Items[0].Criteria[0] != "sub check" || !p.Items[1].Done || p.Items[0].Body != "detail\r\n  - [ ] sub check" && p.Items[0].Body != "detail" {
		t.Fatalf("items %+v", p.Items)
	}
	if got := string(p.Tick(func(id string) bool { return id == "item-1" })); got != strings.Replace(src, "- [ ] one", "- [x] one", 1) {
		t.Fatalf("tick:\n%q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"### Task 1: a\n- [ ] x\n### Task 1: b\n- [ ] y\n", "p.md:3: Task 1 again (first at line 1)"},
		{"### Task 1:\n- [ ] x\n", "p.md:1: task 1 has no title"},
		{"### Task 1: a\n-[ ] x\n", "p.md:2: malformed checkbox"},
		{"### Task 1: a\n- [ ] x\n#### Task two\n", "p.md:3: a task heading must read"},
		{"### Task 1: a\n- [ ] x\n```\nopen\n", "p.md:3: a code block that never closes"},
		{"just prose\n", "p.md: no work found"},
		{"### Task 1: a\n- [ ]\n", "p.md:2: an empty checkbox"},
	} {
		_, err := Parse("p.md", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}
