package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"time"

	"github.com/ralph-loop/ralph/internal/schedule"
)

// benchSchedule measures time to done: how long `ralph run` takes to
// finish a PRD whose stories depend on each other, sequentially and with
// 2 and 4 workers, beside the best schedule of the same DAG with no
// harness cost.
//
// The DAG is the shape of a small feature: one root story; six stories
// after it; three joins, each after two of the six; two last stories,
// each after two joins. Each story's agent takes 1.0 s (the bench's own
// sleep agent) and its gate 0.5 s (`sleep 0.5`), so a story costs 1.5 s
// of a worker's time. In a parallel run the merge queue judges each story
// on the tree it will land as (the stories ahead of it merged in), so the
// gate runs once per story there too; what ralph adds is its own cost.
//
// With only "dist" (schedule:dist, not in the default set: it takes
// about three minutes) it runs instead a random 200-story DAG on a
// coordinator and 8 worker processes of one slot each on this machine,
// beside the lower bound max(critical path, total work / 8).
func benchSchedule(tmp, bin, only string) {
	const agent, gate = time.Second, 500 * time.Millisecond
	gateCmd := fmt.Sprintf("sleep %g", gate.Seconds())
	fmt.Println("\n## Time to done on a story DAG")
	fmt.Printf("\nAgent %.1f s and gate `%s` per story, and each story's check `test -f out-<id>.txt`; real ralph, real git repositories; %s.\n", agent.Seconds(), gateCmd, loadLine())
	if only == "dist" {
		const workers = 8
		stories := envInt("BENCH_DIST_STORIES", 200)
		d := randomDAG(rand.New(rand.NewSource(42)), stories)
		for i := range d {
			d[i].Dur = agent
		}
		fmt.Printf("%d stories in a random DAG (layers of width 1–8, one to three dependencies each); a coordinator and %d worker processes of one slot each on this machine over loopback. Bound: max(critical path, total work / %d), each story taking agent + gate.\n\n", stories, workers, workers)
		fmt.Println("| run | workers | time to done | bound | ratio | goal | gate runs per landed story | goal |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		dir := filepath.Join(tmp, "schedule-dist")
		dagRepo(dir, d, gateCmd)
		// --parallel: twice the slots (and two), as the README advises.
		took := coordinate(tmp, bin, dir, workers, 1, 2*workers+2, sleepAgentCmd())
		if keep := os.Getenv("BENCH_KEEP"); keep != "" {
			copyFile(filepath.Join(dir, ".ralph", "events.jsonl"), filepath.Join(keep, "events-dist.jsonl"))
		}
		full := append([]dagStory(nil), d...)
		for i := range full {
			full[i].Dur = agent + gate
		}
		bound := schedule.LowerBound(full, workers)
		ratio := float64(took) / float64(bound)
		runs, landed := gateRuns(dir, "test")
		perStory := float64(runs) / float64(max(landed, 1))
		fmt.Printf("| ralph coordinator + %d workers | %d | %s | %s | %.2f | %s | %.2f (%d runs, %d landed) | %s |\n", workers, workers, secs3(took), secs3(bound), ratio,
			goalVerdict(ratio <= distBoundGoal, fmt.Sprintf("≤ %.1f× with a core per worker", distBoundGoal)), perStory, runs, landed, goalVerdict(perStory <= distGateGoal, fmt.Sprintf("≤ %.1f", distGateGoal)))
		fmt.Printf("\nThis machine has %d CPUs for %d workers and the coordinator: the time to done is bound by the CPUs here; gate runs per landed story do not depend on the machine. Gate runs are the run-wide gate's, on the workers and on the coordinator (its run at the base not counted), read from the stories' transcripts.\n", runtime.NumCPU(), workers)
		return
	}
	d := featureDAG(agent)
	fmt.Printf("%d stories: a root, six after it, three joins of two of them each, two last stories after two joins each.\n", len(d))
	fmt.Println("Best schedule: the shortest time to done over every way to run the DAG on that many workers, each story taking agent + gate, no harness cost.")
	fmt.Println()
	fmt.Println("| run | workers | runs | time to done (median) | best schedule | ratio | goal | gate runs per landed story |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, p := range []int{1, 2, 4, 8} {
		runs := benchRepeat(p)
		var took []time.Duration
		gates, landed := 0, 0
		for r := 0; r < runs; r++ {
			dir := filepath.Join(tmp, fmt.Sprintf("schedule-p%d-%d", p, r))
			t, _ := runDAG(dir, bin, d, p, gateCmd)
			took = append(took, t)
			g, l := gateRuns(dir, "test")
			gates, landed = gates+g, landed+l
			_ = os.RemoveAll(dir)
		}
		best := bestMakespan(d, p, agent+gate)
		name := "ralph run"
		if p > 1 {
			name = fmt.Sprintf("ralph run --parallel %d", p)
		}
		ratio := float64(median(took)) / float64(best)
		verdict := ""
		if goal := scheduleGoals[p]; goal > 0 {
			verdict = goalVerdict(ratio <= goal, fmt.Sprintf("≤ %.2f×", goal))
		}
		fmt.Printf("| %s | %d | %d | %s | %s | %.2f | %s | %.2f |\n", name, p, runs, secs3(median(took)), secs3(best), ratio, verdict, float64(gates)/float64(max(landed, 1)))
	}
	fmt.Printf("\nOn %d CPUs a run of more workers than CPUs shares them: its ratio is bound by the CPUs as much as by ralph.\n", runtime.NumCPU())
}

// Goals of schedule:dist: time to done as a ratio of the lower bound on
// a machine with a core per worker, and gate runs per landed story.
const (
	distBoundGoal = 1.3
	distGateGoal  = 1.1
)

// gateRuns counts the runs of the run-wide gate named gate in a run's
// story transcripts (a worker's, forwarded with its agent's output, and
// the judge's own; a worker's result the coordinator took without running
// the gate again is not a run) and the stories that landed.
func gateRuns(dir, gate string) (runs, landed int) {
	logs, err := filepath.Glob(filepath.Join(dir, ".ralph", "transcripts", "*.log"))
	check(err)
	done := regexp.MustCompile(`(?m)^=== gate ` + regexp.QuoteMeta(gate) + `: (passed|FAILED) \(exit `)
	for _, l := range logs {
		b, err := os.ReadFile(l)
		check(err)
		runs += len(done.FindAll(b, -1))
	}
	for _, ev := range events(dir) {
		if ev["type"] == "item_passed" {
			landed++
		}
	}
	return runs, landed
}

// scheduleGoals are the most time to done may be, as a ratio of the best
// schedule, by workers.
var scheduleGoals = map[int]float64{4: 1.15, 8: 1.2}

// featureDAG is the 12-story DAG of benchSchedule, each story's agent
// taking agent.
func featureDAG(agent time.Duration) []dagStory {
	d := []dagStory{{ID: "S01"}}
	for i := 2; i <= 7; i++ {
		d = append(d, dagStory{ID: fmt.Sprintf("S%02d", i), Deps: []string{"S01"}})
	}
	d = append(d,
		dagStory{ID: "S08", Deps: []string{"S02", "S03"}},
		dagStory{ID: "S09", Deps: []string{"S04", "S05"}},
		dagStory{ID: "S10", Deps: []string{"S06", "S07"}},
		dagStory{ID: "S11", Deps: []string{"S08", "S09"}},
		dagStory{ID: "S12", Deps: []string{"S09", "S10"}})
	for i := range d {
		d[i].Dur = agent
	}
	return d
}

// bestMakespan is the shortest time to done of d on p workers when every
// story costs the same time: then some best schedule starts stories only
// at multiples of that cost, so it is a number of rounds, in each of which
// every worker runs at most one story whose dependencies finished in
// earlier rounds. A breadth-first search over the sets of finished
// stories finds the fewest rounds; running fewer ready stories than there
// are free workers never finishes sooner, so only the largest choices are
// followed.
func bestMakespan(d []dagStory, p int, cost time.Duration) time.Duration {
	if len(d) > 24 {
		panic("bestMakespan: the search is for small DAGs")
	}
	index := map[string]int{}
	for i, s := range d {
		index[s.ID] = i
	}
	needs := make([]uint32, len(d))
	for i, s := range d {
		for _, dep := range s.Deps {
			needs[i] |= 1 << index[dep]
		}
	}
	all := uint32(1)<<len(d) - 1
	seen := map[uint32]bool{0: true}
	frontier := []uint32{0}
	for rounds := 0; len(frontier) > 0; rounds++ {
		var next []uint32
		for _, done := range frontier {
			if done == all {
				return time.Duration(rounds) * cost
			}
			var ready []uint32
			for i := range d {
				if done&(1<<i) == 0 && needs[i]&^done == 0 {
					ready = append(ready, 1<<i)
				}
			}
			for _, pick := range subsets(ready, min(p, len(ready))) {
				if s := done | pick; !seen[s] {
					seen[s] = true
					next = append(next, s)
				}
			}
		}
		frontier = next
	}
	panic("bestMakespan: the DAG has a cycle")
}

// subsets is every union of k of the bits.
func subsets(bits []uint32, k int) []uint32 {
	if k == 0 {
		return []uint32{0}
	}
	var out []uint32
	for i := 0; i+k <= len(bits); i++ {
		for _, rest := range subsets(bits[i+1:], k-1) {
			out = append(out, bits[i]|rest)
		}
	}
	return out
}
