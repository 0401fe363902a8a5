package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// taskCompleteGoal is the most `ralph task complete` may take on a
// 5,000-task file: agents run it once per task, inside their iteration.
const taskCompleteGoal = 50 * time.Millisecond

// benchTasks times `ralph task next` and `ralph task complete` as whole
// commands on a 5,000-task file (50 parents × 99 leaves), beside `ralph
// --version` in the same run: the process start-up that every ralph
// command pays. Each completion archives a different leaf; peak memory is
// measured in a run of its own (see peakRSS).
func benchTasks(tmp, bin string) {
	const parents, reps = 50, 10
	dir := filepath.Join(tmp, "tasks")
	check(os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "tasks.jsonl")
	writeTaskTree(file, parents)
	run(dir, gitEnv, "git", "init", "-q", "-b", "main")
	complete := func(id string) []string {
		return []string{bin, "task", "complete", id, "--commit", "abc123", "--file", file}
	}
	leaf := 0
	nextLeaf := func() string { // pending leaves, none completed twice
		leaf++
		return fmt.Sprintf("P%04d.%d", parents/2+leaf%(parents/2), 1+leaf/(parents/2))
	}

	_ = timeCmd(dir, nil, 1, bin, "--version") // the binary into the page cache, untimed
	version := timeCmd(dir, nil, reps, bin, "--version")
	rssVersion := peakRSS(dir, nil, bin, "--version")
	next := timeCmd(dir, nil, reps, bin, "task", "next", "--file", file)
	rssNext := peakRSS(dir, nil, bin, "task", "next", "--file", file)

	// After another program wrote the file (a hand edit, a generator: here
	// the same bytes written again), a completion checks the whole file
	// first; the ones after it find the file as ralph left it.
	var foreign, own []time.Duration
	for i := 0; i < reps; i++ {
		b, err := os.ReadFile(file)
		check(err)
		check(os.WriteFile(file, b, 0o644))
		foreign = append(foreign, timeCmd(dir, nil, 1, complete(nextLeaf())...))
	}
	for i := 0; i < reps; i++ {
		own = append(own, timeCmd(dir, nil, 1, complete(nextLeaf())...))
	}
	rssComplete := peakRSS(dir, nil, complete(nextLeaf())...)

	fmt.Println("\n## Task commands on 5,000 tasks")
	fmt.Printf("\n%d parents × 99 leaves; whole commands (process start included), median of %d runs each, same machine, same run; `ralph --version` (process start-up alone) is the baseline.\n\n", parents, reps)
	fmt.Println("| command | time | ratio to --version | peak RSS | goal |")
	fmt.Println("|---|---|---|---|---|")
	row := func(what string, d time.Duration, rss int64, goal string) {
		mem := ""
		if rss > 0 {
			mem = fmt.Sprintf("%.1f MB", float64(rss)/1024)
		}
		fmt.Printf("| %s | %s | %.2f | %s | %s |\n", what, ms(d), float64(d)/float64(version), mem, goal)
	}
	completeGoal := func(d time.Duration) string {
		if d < taskCompleteGoal {
			return fmt.Sprintf("< %d ms met", taskCompleteGoal.Milliseconds())
		}
		return fmt.Sprintf("< %d ms NOT met", taskCompleteGoal.Milliseconds())
	}
	row("`ralph --version` (baseline)", version, rssVersion, "")
	row("`ralph task next`", next, rssNext, "")
	row("`ralph task complete` (file as ralph left it)", median(own), rssComplete, completeGoal(median(own)))
	row("`ralph task complete` (first after another program wrote the file)", median(foreign), 0, completeGoal(median(foreign)))
	fmt.Println("\nGoals: `ralph task complete` under 50 ms; peak memory under 64 MB.")
}

// writeTaskTree writes parents containers of 99 leaves each: in the first
// half of the parents, leaves 1–50 are blocked, every other leaf pending.
func writeTaskTree(path string, parents int) {
	f, err := os.Create(path)
	check(err)
	w := bufio.NewWriterSize(f, 1<<20)
	for p := 0; p < parents; p++ {
		fmt.Fprintf(w, `{"id":"P%04d","title":"parent %d","status":"pending","leaf":false}`+"\n", p, p)
		for l := 1; l <= 99; l++ {
			status := "pending"
			if p < parents/2 && l <= 50 {
				status = "blocked"
			}
			fmt.Fprintf(w, `{"id":"P%04d.%d","title":"leaf %d of parent %d","status":"%s","leaf":true}`+"\n", p, l, l, p, status)
		}
	}
	check(w.Flush())
	check(f.Close())
}

func copyFile(src, dst string) {
	b, err := os.ReadFile(src)
	check(err)
	check(os.WriteFile(dst, b, 0o644))
}

// timeCmd runs argv reps times and returns the median wall time (peak
// memory is measured on its own: see peakRSS).
func timeCmd(dir string, env []string, reps int, argv ...string) time.Duration {
	var times []time.Duration
	for i := 0; i < reps; i++ {
		cmd, out := command(dir, env, argv...)
		start := time.Now()
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n%s", strings.Join(argv, " "), err, out.String())
			os.Exit(1)
		}
		times = append(times, time.Since(start))
	}
	return median(times)
}
