package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// benchLoop measures ralph's own cost per iteration. The agent returns at
// once (`cat > /dev/null`), so wall time minus the agent's time is the
// harness: prompt building, state and event writes, transcript, process
// start. The baseline is the bash loop people start with, doing the same
// number of iterations in the same run. Commits are measured separately
// with stories that pass.
func benchLoop(tmp, bin string) {
	const n = 200
	dir := filepath.Join(tmp, "loop")
	newRepo(dir, map[string]string{
		"prd.json":  `{"project":"b","branch_name":"ralph/b","user_stories":[{"id":"S-1","title":"never done","priority":1}]}`,
		"PROMPT.md": strings.Repeat("Work on the story. ", 100) + "\n",
	})
	start := time.Now()
	_, _ = runErr(dir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "cat", "--max-iterations", fmt.Sprint(n), "--max-attempts", fmt.Sprint(n+1), "--breaker", "0")
	wall := time.Since(start)
	var agentTime time.Duration
	iters := 0
	for _, ev := range events(dir) {
		if ev["type"] == "agent_finished" {
			if d, ok := ev["data"].(map[string]any)["duration_ms"].(float64); ok {
				agentTime += time.Duration(d * float64(time.Millisecond))
			}
			iters++
		}
	}
	if iters != n {
		fmt.Fprintf(os.Stderr, "bench: expected %d iterations, saw %d\n", n, iters)
		os.Exit(1)
	}
	overhead := (wall - agentTime) / n

	// Baseline: the bash loop with the same agent and prompt.
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do cat < PROMPT.md > /dev/null; i=$((i+1)); done", n)
	start = time.Now()
	run(dir, nil, "bash", "-c", script)
	bashPer := time.Since(start) / n

	// Commit cost: 40 stories that pass at once, no gates.
	const m = 40
	cdir := filepath.Join(tmp, "commits")
	var stories []string
	for i := 1; i <= m; i++ {
		stories = append(stories, fmt.Sprintf(`{"id":"S-%d","title":"s%d","priority":1}`, i, i))
	}
	newRepo(cdir, map[string]string{
		"prd.json": `{"project":"c","branch_name":"ralph/c","user_stories":[` + strings.Join(stories, ",") + `]}`,
		"agent.sh": "cat > /dev/null; echo \"$RALPH_ITERATION\" > \"out-$RALPH_ITEM_ID.txt\"; echo '<promise>COMPLETE</promise>'\n",
	})
	start = time.Now()
	run(cdir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	cwall := time.Since(start)
	var cagent time.Duration
	for _, ev := range events(cdir) {
		if ev["type"] == "agent_finished" {
			cagent += time.Duration(ev["data"].(map[string]any)["duration_ms"].(float64) * float64(time.Millisecond))
		}
	}
	perPassing := (cwall - cagent) / m
	commit := perPassing - overhead

	fmt.Println("\n## Harness overhead per iteration (issue 2)")
	fmt.Printf("\n%d iterations, agent `cat` (returns at once), prompt %d bytes\n\n", n, 1900)
	fmt.Println("| measure | per iteration | ratio |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| bash loop `while …; do agent < PROMPT.md; done` (baseline) | %s | 1.00 |\n", ms(bashPer))
	fmt.Printf("| ralph overhead (wall − agent time), no commit | %s | %.2f |\n", ms(overhead), float64(overhead)/float64(bashPer))
	fmt.Printf("| ralph commit cost per passing story (git add + commit + prd write-back) | %s | %.2f |\n", ms(commit), float64(commit)/float64(bashPer))
	goal := "met"
	if overhead >= 20*time.Millisecond {
		goal = "NOT met"
	}
	fmt.Printf("\nGoal: overhead under 20 ms per iteration excluding commits — %s (%s).\n", goal, ms(overhead))
}
