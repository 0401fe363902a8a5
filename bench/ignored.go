package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ignoredGoal is the most one iteration may cost ralph with a large
// ignored folder, as a ratio of its cost without one.
const ignoredGoal = 1.2

// benchIgnored measures ralph's own cost of one iteration in a repository
// with an ignored dependency folder (node_modules/ of 50,000 files in 500
// packages, which the judge gives each of its checkouts as the base had
// it) beside the same repository without one, with --no-sandbox and with
// the sandbox. Each run is 16 stories that pass at once; the cost of an
// iteration is the time from its start to the next one's minus the
// agent's run (the median over the run), and the run's start (until its
// first iteration, when the judge takes its copy of the folder) is shown
// beside it. BENCH_IGNORED_REPS runs of each (default 3), interleaved;
// medians.
func benchIgnored(tmp, bin string) {
	reps := envInt("BENCH_IGNORED_REPS", 3)
	const stories = 16
	sizes := []int{0, 50000}
	root, err := os.MkdirTemp(tmp, "ignored-")
	check(err)
	defer os.RemoveAll(root)
	fmt.Println("\n## Flat in ignored files")
	fmt.Printf("\n%d stories that pass at once per run; node_modules/ ignored by .gitignore; ralph's own time per iteration (iteration start to the next, minus the agent's run; median of the run), then the median of %d runs; %s\n\n", stories, reps, loadLine())
	fmt.Println("| run | ignored files | per iteration | ratio to none | goal | run start (until the first iteration) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, v := range storyRunners[1:] {
		dirs := make([]string, len(sizes))
		per := make([][]time.Duration, len(sizes))
		start := make([][]time.Duration, len(sizes))
		for r := 0; r < reps; r++ {
			for i, n := range sizes {
				if dirs[i] == "" {
					dirs[i] = ignoredRepo(filepath.Join(root, v.repo(strconv.Itoa(n))), stories, n)
				} else {
					run(dirs[i], gitEnv, "git", "checkout", "-q", "main")
					run(dirs[i], gitEnv, "git", "branch", "-q", "-D", "ralph/b")
				}
				launched := time.Now()
				run(dirs[i], gitEnv, v.argv(bin, stories, "true", true, "--fresh")...)
				costs, first := harnessCosts(events(dirs[i]))
				per[i] = append(per[i], median(costs))
				start[i] = append(start[i], first.Sub(launched))
			}
		}
		base := median(per[0])
		for i, n := range sizes {
			ratio := float64(median(per[i])) / float64(base)
			verdict := ""
			if i > 0 {
				verdict = goalVerdict(ratio <= ignoredGoal, fmt.Sprintf("≤ %.1f×", ignoredGoal))
			}
			fmt.Printf("| %s | %d | %s | %.2f | %s | %s |\n", v.name, n, ms(median(per[i])), ratio, verdict, ms(median(start[i])))
		}
	}
}

// ignoredRepo is loopRepo's repository of n stories with files ignored
// files in node_modules/: 500 packages of a package.json and their lib/
// files.
func ignoredRepo(dir string, n, files int) string {
	dir = loopRepo(filepath.Dir(dir), 0, filepath.Base(dir), "true", n)
	writeFile(filepath.Join(dir, ".gitignore"), "node_modules/\n")
	run(dir, gitEnv, "git", "add", ".gitignore")
	run(dir, gitEnv, "git", "commit", "-qm", "ignore node_modules")
	const packages = 500
	for i := 0; i < files; i++ {
		pkg := filepath.Join(dir, "node_modules", fmt.Sprintf("pkg%03d", i%packages))
		k := i / packages
		if k == 0 {
			writeFile(filepath.Join(pkg, "package.json"), fmt.Sprintf(`{"name":"pkg%03d","version":"1.0.0","main":"lib/f0.js"}`+"\n", i%packages))
			continue
		}
		writeFile(filepath.Join(pkg, "lib", fmt.Sprintf("d%d", k/20), fmt.Sprintf("f%d.js", k)), fmt.Sprintf("module.exports = %d;\n", i))
	}
	return dir
}
