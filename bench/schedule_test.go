package main

import (
	"testing"
	"time"
)

// The feature DAG's best schedules, worked out by hand: sequential, all
// twelve stories one after another; on two workers, the root alone and
// then two stories in every round; on three, the root, then S02 S04 S05,
// S03 S06 S07, the three joins, the two last stories; on four no sooner
// (the root, four of the six, the other two with two joins, the third
// join with a last story, the last story that waits on it); on twelve,
// the DAG's depth of four stories.
func TestBestMakespanFeatureDAG(t *testing.T) {
	d := featureDAG(time.Second)
	for _, c := range []struct {
		p    int
		want time.Duration
	}{{1, 18 * time.Second}, {2, 10500 * time.Millisecond}, {3, 7500 * time.Millisecond}, {4, 7500 * time.Millisecond}, {12, 6 * time.Second}} {
		if got := bestMakespan(d, c.p, 1500*time.Millisecond); got != c.want {
			t.Errorf("p=%d: best makespan %v, want %v", c.p, got, c.want)
		}
	}
}

// A case where taking the ready stories in file order loses: on two
// workers, A and B are ready, but only B has a long chain behind it.
func TestBestMakespanPicksTheCriticalStory(t *testing.T) {
	d := []dagStory{{ID: "A"}, {ID: "X"}, {ID: "B"}, {ID: "C", Deps: []string{"B"}}, {ID: "D", Deps: []string{"C"}}}
	// Best: {B, A} {C, X} {D} = 3 rounds; file order {A, X} {B} {C} {D} = 4.
	if got := bestMakespan(d, 2, time.Second); got != 3*time.Second {
		t.Errorf("best makespan %v, want 3s", got)
	}
}
