package engine

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/judge"
)

// The agent's sandbox keeps the contract's protected files read-only and
// its prompt names them; a person's allow_test_changes lifts both, and
// under protected_rule: declarations a Go test file stays writable (the
// judge checks its old declarations instead).
func TestProtectedFilesForTheAgent(t *testing.T) {
	k := &judge.Contract{Protected: []string{"calc_test.go", "tests/a.py", "golden/out.txt"}}
	x := &Iteration{contract: k, Workspace: Workspace{Dir: "/w"}}
	if got, want := x.readOnly(), []string{filepath.Join("/w", "calc_test.go"), filepath.Join("/w", "tests/a.py"), filepath.Join("/w", "golden/out.txt")}; !slices.Equal(got, want) {
		t.Fatalf("read-only %v, want %v", got, want)
	}
	sec := protectedSection(k, "story")
	for _, want := range []string{"## Files you may not change", "calc_test.go, tests/a.py, golden/out.txt", "Put new tests in new files"} {
		if !strings.Contains(sec, want) {
			t.Errorf("prompt section lacks %q:\n%s", want, sec)
		}
	}
	k.Declarations = true
	if got := x.readOnly(); slices.Contains(got, filepath.Join("/w", "calc_test.go")) || len(got) != 2 {
		t.Fatalf("declarations: read-only %v", got)
	}
	if sec := protectedSection(k, "story"); !strings.Contains(sec, "add new test functions to a Go test file") {
		t.Errorf("declarations: %s", sec)
	}
	k.AllowTestChanges = true
	if x.readOnly() != nil || protectedSection(k, "story") != "" {
		t.Fatal("allow_test_changes: still protected")
	}
	var many []string
	for i := range 25 {
		many = append(many, filepath.Join("t", string(rune('a'+i))+"_test.go"))
	}
	if sec := protectedSection(&judge.Contract{Protected: many}, "task"); !strings.Contains(sec, "and 5 more") {
		t.Errorf("a long list is not cut: %s", sec)
	}
}
