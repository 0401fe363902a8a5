package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/schedule"
)

// dagStory is a story of the benchmarks' DAGs (the schedule package's
// bounds take them as they are).
type dagStory = schedule.Story

// randomDAG makes n stories in layers of width 1..8; each story depends on
// one to three stories of earlier layers.
func randomDAG(rng *rand.Rand, n int) []dagStory {
	var out []dagStory
	var layers [][]int
	for len(out) < n {
		w := 1 + rng.Intn(8)
		var layer []int
		for i := 0; i < w && len(out) < n; i++ {
			s := dagStory{ID: fmt.Sprintf("S%02d", len(out)+1), Dur: time.Duration(200+rng.Intn(801)) * time.Millisecond}
			if len(layers) > 0 {
				deps := map[string]bool{}
				k := 1 + rng.Intn(3)
				for j := 0; j < k; j++ {
					l := layers[rng.Intn(len(layers))]
					deps[out[l[rng.Intn(len(l))]].ID] = true
				}
				for d := range deps {
					s.Deps = append(s.Deps, d)
				}
				sort.Strings(s.Deps)
			}
			layer = append(layer, len(out))
			out = append(out, s)
		}
		layers = append(layers, layer)
	}
	return out
}

func levels(d []dagStory) [][]dagStory {
	lv := map[string]int{}
	var out [][]dagStory
	for _, s := range d {
		l := 0
		for _, dep := range s.Deps {
			l = max(l, lv[dep]+1)
		}
		lv[s.ID] = l
		for len(out) <= l {
			out = append(out, nil)
		}
		out[l] = append(out[l], s)
	}
	return out
}

// listSchedule is the makespan of running jobs on n workers in order.
func listSchedule(durs []time.Duration, n int) time.Duration {
	w := make([]time.Duration, n)
	for _, d := range durs {
		sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
		w[0] += d
	}
	var m time.Duration
	for _, x := range w {
		m = max(m, x)
	}
	return m
}

// levelSchedule runs the DAG level by level (prd.Levels): each level waits
// for its slowest story.
func levelSchedule(d []dagStory, n int) time.Duration {
	var t time.Duration
	for _, l := range levels(d) {
		var durs []time.Duration
		for _, s := range l {
			durs = append(durs, s.Dur)
		}
		t += listSchedule(durs, n)
	}
	return t
}

// readySchedule simulates ralph's scheduler with zero overhead: a story
// starts as soon as its dependencies finished and a worker is free; among
// ready stories, the one more stories wait on goes first, then file order
// (all stories have the same priority).
func readySchedule(d []dagStory, n int) time.Duration {
	waiting := dependents(d)
	finish := map[string]time.Duration{}
	started := map[string]bool{}
	workers := make([]time.Duration, n) // when each worker is free
	var makespan time.Duration
	for len(started) < len(d) {
		sort.Slice(workers, func(i, j int) bool { return workers[i] < workers[j] })
		now := workers[0]
		// The story to start on this worker: the earliest it can start
		// (now, if any is ready), then the one more stories wait on,
		// then file order.
		best, bestAt := -1, time.Duration(1<<62)
		for i, s := range d {
			if started[s.ID] {
				continue
			}
			at, ok := now, true
			for _, dep := range s.Deps {
				f, done := finish[dep]
				if !done {
					ok = false
					break
				}
				at = max(at, f)
			}
			if ok && (at < bestAt || at == bestAt && waiting[s.ID] > waiting[d[best].ID]) {
				best, bestAt = i, at
			}
		}
		s := d[best]
		started[s.ID] = true
		finish[s.ID] = bestAt + s.Dur
		workers[0] = finish[s.ID]
		makespan = max(makespan, finish[s.ID])
	}
	return makespan
}

// dependents counts the stories that wait on each story, directly or not
// (the same count ralph's scheduler orders by).
func dependents(d []dagStory) map[string]int {
	doc := &prd.PRD{}
	for _, s := range d {
		doc.Stories = append(doc.Stories, prd.Story{ID: s.ID, DependsOn: s.Deps})
	}
	return doc.Dependents()
}

func benchParallel(tmp, bin string) {
	dags := 2
	if v, err := strconv.Atoi(os.Getenv("BENCH_DAGS")); err == nil && v > 0 {
		dags = v
	}
	fmt.Println("\n## Parallel stories: makespan vs lower bound and vs the level schedule")
	fmt.Println("\nRandom DAGs of 50 stories (layers of width 1–8); each story's agent sleeps 0.2–1 s and its work is committed.")
	fmt.Println("Lower bound = max(critical path, total work / N), with the stories' nominal times and again with each agent's measured time. Level schedule = the stories run level by level (dependency levels), each level waiting for its slowest story, computed for the same DAG and N.")
	fmt.Println()
	fmt.Println("| DAG | N | runs | makespan (median) | lower bound | makespan / bound | makespan / bound with measured agent times | level schedule | level / bound | ready queue (simulated) / bound | makespan < level (measured times) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for k := 0; k < dags; k++ {
		rng := rand.New(rand.NewSource(int64(42 + k)))
		d := randomDAG(rng, 50)
		for _, n := range benchNs() {
			// Short runs are repeated and the median kept: one stray
			// stall of the machine moves a 5-second makespan by percents.
			runs := benchRepeat(n)
			type result struct {
				makespan time.Duration
				measured []dagStory
			}
			var results []result
			for r := 0; r < runs; r++ {
				dir := filepath.Join(tmp, fmt.Sprintf("dag%d-n%d-%d", k, n, r))
				m, ms := runDAG(dir, bin, d, n, "")
				results = append(results, result{m, ms})
				_ = os.RemoveAll(dir)
			}
			sort.Slice(results, func(i, j int) bool { return results[i].makespan < results[j].makespan })
			makespan, measured := results[runs/2].makespan, results[runs/2].measured
			bound := schedule.LowerBound(d, n)
			// The same bound with each agent's measured run time (its
			// process start included): what is left above it is ralph's.
			mbound := schedule.LowerBound(measured, n)
			level := levelSchedule(d, n)
			ready := readySchedule(d, n)
			mlevel := levelSchedule(measured, n)
			fmt.Printf("| %d | %d | %d | %.2f s | %.2f s | %.3f | %.3f | %.2f s | %.3f | %.3f | %v |\n", k+1, n, runs, makespan.Seconds(), bound.Seconds(),
				float64(makespan)/float64(bound), float64(makespan)/float64(mbound), level.Seconds(), float64(level)/float64(bound), float64(ready)/float64(bound), makespan < mlevel)
		}
	}
	fmt.Println("\nThe level and ready-queue columns are simulations with the stories' own times and no harness cost; the makespan is measured (agents, worktrees, merges, commits).")
	fmt.Println("Goal: makespan within 1.15× of the lower bound at N = 4, and better than the level schedule on DAGs with uneven story times.")
}

// runDAG runs the DAG with ralph on n workers, each story's agent taking
// its time and then the gate command (none when gate is empty), and
// returns the makespan and the DAG with each story's measured agent time.
func runDAG(dir, bin string, d []dagStory, n int, gate string) (time.Duration, []dagStory) {
	args := append([]string{bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", sleepAgentCmd(), "--parallel", strconv.Itoa(n)}, dagRepo(dir, d, gate)...)
	start := time.Now()
	run(dir, gitEnv, args...)
	took := time.Since(start)
	measured := append([]dagStory(nil), d...)
	byID := map[string]time.Duration{}
	for _, ev := range events(dir) {
		if ev["type"] == "agent_finished" {
			byID[ev["item"].(string)] += time.Duration(ev["data"].(map[string]any)["duration_ms"].(float64) * float64(time.Millisecond))
		}
	}
	for i := range measured {
		if v, ok := byID[measured[i].ID]; ok {
			measured[i].Dur = v
		}
	}
	if keep := os.Getenv("BENCH_KEEP"); keep != "" {
		copyFile(filepath.Join(dir, ".ralph", "events.jsonl"), filepath.Join(keep, fmt.Sprintf("events-n%d.jsonl", n)))
		copyFile(filepath.Join(dir, "prd.json"), filepath.Join(keep, fmt.Sprintf("prd-n%d.json", n)))
	}
	return took, measured
}

// dagRepo makes a repository in dir with the DAG as prd.json (each story
// with its time in times/<id> for the sleep agent) and gate as its quality
// check; it returns the flags a run of it needs (--no-gates without one).
func dagRepo(dir string, d []dagStory, gate string) []string {
	type story struct {
		ID        string   `json:"id"`
		Title     string   `json:"title"`
		Priority  int      `json:"priority"`
		DependsOn []string `json:"depends_on"`
		Checks    []string `json:"checks,omitempty"`
	}
	var stories []story
	files := map[string]string{}
	for _, s := range d {
		st := story{ID: s.ID, Title: "story " + s.ID, Priority: 1, DependsOn: append([]string{}, s.Deps...)}
		if gate != "" {
			// The evidence a judged story needs: its file, there now,
			// was not at its base.
			st.Checks = []string{"test -f out-" + s.ID + ".txt"}
		}
		stories = append(stories, st)
		files["times/"+s.ID] = fmt.Sprintf("%.3f\n", s.Dur.Seconds())
	}
	doc := map[string]any{"project": "dag", "branch_name": "ralph/dag", "user_stories": stories}
	args := []string{"--no-gates"}
	if gate != "" {
		doc["quality_checks"] = map[string]string{"test": gate}
		args = nil
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	files["prd.json"] = string(b)
	newRepo(dir, files)
	return args
}

// sleepAgentCmd is the --agent-cmd that runs sleepAgent: this program's
// copy in the bench's folder, which a sandboxed agent sees (`go run` may
// run the program from its build cache, which the sandbox hides).
func sleepAgentCmd() string {
	return proc.QuoteArgv([]string{benchSelf, "sleep-agent"})
}

// benchSelf is this program's copy in the bench's folder.
var benchSelf string

// selfCopy copies this program into dir and returns the copy's path.
func selfCopy(dir string) string {
	self, err := os.Executable()
	check(err)
	b, err := os.ReadFile(self)
	check(err)
	p := filepath.Join(dir, "bench")
	check(os.WriteFile(p, b, 0o755))
	return p
}

// sleepAgent is the stories' agent (`bench sleep-agent`, one process, so
// that the agent's own start-up stays small beside ralph's cost): it reads
// the prompt, sleeps the story's time from times/<id>, writes out-<id>.txt
// and claims the story.
func sleepAgent() {
	id := os.Getenv("RALPH_ITEM_ID")
	_, _ = io.Copy(io.Discard, os.Stdin)
	b, err := os.ReadFile(filepath.Join("times", id))
	check(err)
	secs, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	check(err)
	time.Sleep(time.Duration(secs * float64(time.Second)))
	check(os.WriteFile("out-"+id+".txt", []byte("done\n"), 0o644))
	fmt.Println("<promise>COMPLETE</promise>")
}

// benchRepeat is how many times a (DAG, N) run is made: BENCH_REPEAT, else
// 3 for the short runs (N ≥ 4) and 1 for the long ones.
func benchRepeat(n int) int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_REPEAT")); err == nil && v > 0 {
		return v
	}
	if n >= 4 {
		return 3
	}
	return 1
}

// benchNs are the worker counts to run (BENCH_N=4 runs one).
func benchNs() []int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_N")); err == nil && v > 0 {
		return []int{v}
	}
	return []int{1, 2, 4, 8}
}
