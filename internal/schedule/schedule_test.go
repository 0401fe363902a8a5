package schedule

import (
	"testing"
	"time"
)

// The bound of a small DAG worked out by hand: a chain A → B → C of 1 s
// + 2 s + 3 s beside a lone story D of 4 s. On one worker the whole work
// (10 s); on two the chain (6 s) is longer than half the work (5 s); the
// order the stories are listed in does not matter.
func TestLowerBound(t *testing.T) {
	s := time.Second
	d := []Story{{ID: "C", Deps: []string{"B"}, Dur: 3 * s}, {ID: "D", Dur: 4 * s}, {ID: "A", Dur: s}, {ID: "B", Deps: []string{"A"}, Dur: 2 * s}}
	for n, want := range map[int]time.Duration{0: 10 * s, 1: 10 * s, 2: 6 * s, 8: 6 * s} {
		if got := LowerBound(d, n); got != want {
			t.Errorf("n=%d: %v, want %v", n, got, want)
		}
	}
	if got := CriticalPath(d); got != 6*s {
		t.Errorf("critical path %v, want 6s", got)
	}
}

// A dependency outside the set adds nothing; a cycle does not hang.
func TestCriticalPathOddInput(t *testing.T) {
	s := time.Second
	if got := CriticalPath([]Story{{ID: "A", Deps: []string{"gone"}, Dur: s}}); got != s {
		t.Errorf("unknown dependency: %v", got)
	}
	if got := CriticalPath([]Story{{ID: "A", Deps: []string{"B"}, Dur: s}, {ID: "B", Deps: []string{"A"}, Dur: s}}); got != 2*s {
		t.Errorf("cycle: %v", got)
	}
}
