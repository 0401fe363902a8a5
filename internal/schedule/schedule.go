// Package schedule is the time a DAG of work takes on N workers: its
// critical path, its total work and the lower bound no schedule beats.
// The benchmarks (bench/) measure ralph's parallel runs against it and
// the web dashboard draws it on a run's timeline.
package schedule

import "time"

// Story is a unit of work: the stories it waits for and how long it
// takes.
type Story struct {
	ID   string
	Deps []string
	Dur  time.Duration
}

// CriticalPath is the longest chain of dependent stories, in time: no
// number of workers finishes sooner. A dependency that is not among d
// adds nothing; d need not be in dependency order.
func CriticalPath(d []Story) time.Duration {
	byID := make(map[string]*Story, len(d))
	for i := range d {
		byID[d[i].ID] = &d[i]
	}
	finish := make(map[string]time.Duration, len(d))
	visiting := map[string]bool{}
	var end func(s *Story) time.Duration
	end = func(s *Story) time.Duration {
		if f, ok := finish[s.ID]; ok {
			return f
		}
		if visiting[s.ID] {
			return 0 // a cycle (a PRD that failed validation): counted once
		}
		visiting[s.ID] = true
		var start time.Duration
		for _, dep := range s.Deps {
			if ds := byID[dep]; ds != nil {
				start = max(start, end(ds))
			}
		}
		finish[s.ID] = start + s.Dur
		return finish[s.ID]
	}
	var best time.Duration
	for i := range d {
		best = max(best, end(&d[i]))
	}
	return best
}

// TotalWork is the stories' time added up.
func TotalWork(d []Story) (t time.Duration) {
	for _, s := range d {
		t += s.Dur
	}
	return t
}

// LowerBound is the time to done that no schedule of d on n workers
// beats: the critical path, or the total work shared evenly, whichever
// is longer.
func LowerBound(d []Story, n int) time.Duration {
	return max(CriticalPath(d), TotalWork(d)/time.Duration(max(n, 1)))
}
