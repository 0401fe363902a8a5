package main

import (
	"fmt"
	"path/filepath"
	"time"
)

// sandboxGoal is what the sandbox may add to one iteration (agent and
// gate confined, the agent's proxy opened and closed).
const sandboxGoal = 30 * time.Millisecond

// benchSandbox times iterations that pass at once (a cmd agent writing
// one file, one gate), with the sandbox (the default) and with
// --no-sandbox, alternating runs of the same repository shape, and prints
// the cost per iteration and the ratio.
func benchSandbox(tmp, bin string) {
	n := envInt("BENCH_SANDBOX_STORIES", 20)
	reps := benchRepeat(5)
	root := filepath.Join(tmp, "sandbox")
	var on, off []time.Duration
	for rep := 0; rep < reps; rep++ {
		for _, confined := range []bool{false, true} {
			dir := loopRepo(root, rep, map[bool]string{true: "ralph-sandbox", false: "ralph-nosandbox"}[confined], "true", n)
			argv := []string{bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh"}
			if !confined {
				argv = append(argv, "--no-sandbox")
			}
			start := time.Now()
			run(dir, gitEnv, argv...)
			per := time.Since(start) / time.Duration(n)
			if confined {
				on = append(on, per)
			} else {
				off = append(off, per)
			}
		}
	}
	mOn, mOff := median(on), median(off)
	cost := mOn - mOff
	verdict := fmt.Sprintf("≤ %s met", ms(sandboxGoal))
	if cost > sandboxGoal {
		verdict = fmt.Sprintf("≤ %s NOT met", ms(sandboxGoal))
	}
	fmt.Printf("\n## Sandbox: cost per iteration (%d passing stories, agent and gate confined, median of %d runs)\n\n", n, reps)
	fmt.Println("| without sandbox | with sandbox | cost | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| %s | %s | %s | %.2f× | %s |\n", ms(mOff), ms(mOn), ms(cost), float64(mOn)/float64(mOff), verdict)
}
