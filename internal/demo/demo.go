// Package demo builds the self-contained demo project: a small Go module
// with a failing test per story, a three-story PRD where story 3 depends on
// stories 1 and 2, and a script for the scripted agent in which story 2's
// first attempt fails its check, so the demo shows a retry carrying the gate
// output.
package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// files of the demo project before any story is done.
var files = map[string]string{
	"go.mod":    "module example.com/calc\n\ngo 1.21\n",
	"README.md": "# calc\n\nA tiny calculator, built story by story by ralph's scripted demo agent.\n",
	"calc/calc.go": `// Package calc is a tiny calculator.
package calc

// Add returns a + b.
func Add(a, b int) int { return 0 }

// Sub returns a - b.
func Sub(a, b int) int { return 0 }

// Eval evaluates a sum such as "1+2-3" (integers, + and -).
func Eval(expr string) (int, error) { return 0, nil }
`,
	"calc/add_test.go": `package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 3); got != 5 {
		t.Fatalf("Add(2, 3) = %d, want 5", got)
	}
}
`,
	"calc/sub_test.go": `package calc

import "testing"

func TestSub(t *testing.T) {
	if got := Sub(7, 3); got != 4 {
		t.Fatalf("Sub(7, 3) = %d, want 4", got)
	}
}
`,
	"calc/eval_test.go": `package calc

import "testing"

func TestEval(t *testing.T) {
	for expr, want := range map[string]int{"1+2": 3, "10-4+1": 7, "5": 5, "2-7": -5} {
		got, err := Eval(expr)
		if err != nil || got != want {
			t.Fatalf("Eval(%q) = %d, %v; want %d", expr, got, err, want)
		}
	}
	if _, err := Eval("1+x"); err == nil {
		t.Fatal("Eval(\"1+x\") must fail")
	}
}
`,
}

// prd is the demo's prd.json (snake_case format).
const prd = `{
  "project": "calc",
  "feature": "Calculator basics",
  "branch_name": "ralph/calculator-basics",
  "version": "1.0",
  "user_stories": [
    {
      "id": "US-001",
      "title": "Add two numbers",
      "description": "calc.Add returns the sum of its arguments.",
      "acceptance_criteria": ["TestAdd passes", "go vet is clean"],
      "priority": 1,
      "depends_on": [],
      "complexity": 1,
      "passes": false,
      "checks": ["go test -count=1 -run TestAdd ./calc/"]
    },
    {
      "id": "US-002",
      "title": "Subtract two numbers",
      "description": "calc.Sub returns a - b.",
      "acceptance_criteria": ["TestSub passes", "go vet is clean"],
      "priority": 2,
      "depends_on": [],
      "complexity": 1,
      "passes": false,
      "checks": ["go test -count=1 -run TestSub ./calc/"]
    },
    {
      "id": "US-003",
      "title": "Evaluate sums like 1+2-3",
      "description": "calc.Eval parses integers joined by + and - and uses Add and Sub.",
      "acceptance_criteria": ["TestEval passes", "Invalid input is an error", "All tests pass"],
      "priority": 1,
      "depends_on": ["US-001", "US-002"],
      "complexity": 2,
      "passes": false,
      "checks": ["go test -count=1 ./..."]
    }
  ],
  "technical_requirements": ["Standard library only"],
  "quality_checks": {
    "typecheck": "go vet ./...",
    "lint": "test -z \"$(gofmt -l .)\"",
    "test": "",
    "build": "go build ./..."
  },
  "created_at": "2026-11-22T00:00:00Z",
  "updated_at": "2026-11-22T00:00:00Z"
}
`

// script replays the demo. US-002's first turn has a bug (a + b), which the
// harness's check catches; its second turn fixes it.
var script = `# Scripted agent for ` + "`ralph demo`" + `: deterministic file edits, not a model.
items:
  US-001:
    - write:
        calc/calc.go: |
          // Package calc is a tiny calculator.
          package calc

          // Add returns a + b.
          func Add(a, b int) int { return a + b }

          // Sub returns a - b.
          func Sub(a, b int) int { return 0 }

          // Eval evaluates a sum such as "1+2-3" (integers, + and -).
          func Eval(expr string) (int, error) { return 0, nil }
      message: |
        Implemented Add.

        ## Learnings
        - calc.go holds every operation; keep one function per story.

        <promise>COMPLETE</promise>
  US-002:
    - write:
        calc/calc.go: |
          // Package calc is a tiny calculator.
          package calc

          // Add returns a + b.
          func Add(a, b int) int { return a + b }

          // Sub returns a - b.
          func Sub(a, b int) int { return a + b }

          // Eval evaluates a sum such as "1+2-3" (integers, + and -).
          func Eval(expr string) (int, error) { return 0, nil }
      message: |
        Implemented Sub (copied from Add).

        <promise>COMPLETE</promise>
    - write:
        calc/calc.go: |
          // Package calc is a tiny calculator.
          package calc

          // Add returns a + b.
          func Add(a, b int) int { return a + b }

          // Sub returns a - b.
          func Sub(a, b int) int { return a - b }

          // Eval evaluates a sum such as "1+2-3" (integers, + and -).
          func Eval(expr string) (int, error) { return 0, nil }
      message: |
        The harness's check showed Sub(7, 3) returned 10: fixed the operator.

        ## Learnings
        - Run the story's own check (go test -run TestSub ./calc/) before claiming.

        <promise>COMPLETE</promise>
  US-003:
    - write:
        calc/calc.go: |
` + indent(FinalCalc, "          ") + `      message: |
        Eval walks the expression once and reuses Add and Sub.

        LEARNING: strconv.Atoi rejects empty strings, which catches "1+" too.

        <promise>COMPLETE</promise>
`

// FinalCalc is calc/calc.go once all three stories are done (the scripted
// agent's US-003 turn writes it; other tests check a model's work against it).
const FinalCalc = `// Package calc is a tiny calculator.
package calc

import (
	"fmt"
	"strconv"
)

// Add returns a + b.
func Add(a, b int) int { return a + b }

// Sub returns a - b.
func Sub(a, b int) int { return a - b }

// Eval evaluates a sum such as "1+2-3" (integers, + and -).
func Eval(expr string) (int, error) {
	total, plus, start := 0, true, 0
	for i := 0; i <= len(expr); i++ {
		if i < len(expr) && expr[i] != '+' && expr[i] != '-' {
			continue
		}
		n, err := strconv.Atoi(expr[start:i])
		if err != nil {
			return 0, fmt.Errorf("calc: bad number %q in %q", expr[start:i], expr)
		}
		if plus {
			total = Add(total, n)
		} else {
			total = Sub(total, n)
		}
		plus = i == len(expr) || expr[i] == '+'
		start = i + 1
	}
	return total, nil
}
`

// indent prefixes every non-empty line of s (a YAML block scalar's body).
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// Create writes the project into dir (a new git repository with one
// commit on main) and returns the path of the script for the agent.
func Create(ctx context.Context, dir string) (scriptPath string, err error) {
	project := filepath.Join(dir, "calc")
	for name, content := range files {
		p := filepath.Join(project, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(project, "prd.json"), []byte(prd), 0o644); err != nil {
		return "", err
	}
	repo, err := git.Init(ctx, proc.Exec{}, project, "main")
	if err != nil {
		return "", err
	}
	if err := repo.AddAll(ctx); err != nil {
		return "", err
	}
	if _, err := repo.Commit(ctx, "Initial calc skeleton with failing tests\n", false); err != nil {
		return "", err
	}
	scriptPath = filepath.Join(dir, "demo-script.yaml")
	return scriptPath, os.WriteFile(scriptPath, []byte(script), 0o644)
}

// ProjectDir is where Create puts the repository.
func ProjectDir(dir string) string { return filepath.Join(dir, "calc") }
