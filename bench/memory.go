package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memoryAgent reports one 200-byte learning per iteration, on one of
// eight topics, and records the size of the prompt it got and whether the
// learning of iteration 3 was in it.
const memoryAgent = `n=$RALPH_ITERATION
size=$(wc -c < "$RALPH_PROMPT_FILE")
l3=no
if grep -q 'L-3 ' "$RALPH_PROMPT_FILE"; then l3=yes; fi
echo "$n $size $l3" >> sizes.txt
echo "$RALPH_ITEM_ID" > "$RALPH_ITEM_ID.txt"
pad=$(printf '%0150d' 0 | tr 0 x)
echo "LEARNING: L-$n (topic $((n % 8))): the module of $RALPH_ITEM_ID keeps its state in one file $pad"
echo '<promise>COMPLETE</promise>'
`

// memorySummarizer groups the learnings it is shown by topic and keeps,
// per topic, the first learning and how many there were: what a
// summariser does with eight recurring patterns (bounded, and the first
// learning of each kept).
const memorySummarizer = `awk '
  match($0, /L-[0-9]+ \(topic [0-9]+\)/) {
    s = substr($0, RSTART, RLENGTH); split(s, a, " "); t = a[2] " " a[3]
    if (!(t in first)) { first[t] = a[1]; order[++k] = t }
    count[t]++
  }
  match($0, /^- topic [0-9]+: first L-[0-9]+ , [0-9]+ learnings/) {
    split($0, a, " "); t = "(topic " a[3]; sub(/:$/, ")", t)
    if (!(t in first)) { first[t] = a[5]; order[++k] = t }
    count[t] += a[7]
  }
  END { for (i = 1; i <= k; i++) { t = order[i]; gsub(/[()]/, "", t); printf "- %s: first %s , %d learnings\n", t, first[order[i]], count[order[i]] } }'
`

// benchMemory: prompt bytes at iteration 200 vs iteration 10 with the
// progress digest's memory (goal: at most 1.2x), and whether iteration
// 3's learning still reaches iteration 200's prompt (summarised).
func benchMemory(tmp, bin string) {
	const n = 200
	dir := filepath.Join(tmp, "memory")
	newRepo(dir, map[string]string{"prd.json": storyPRD(n, "true", "%s.txt"), "agent.sh": memoryAgent, "sum.sh": memorySummarizer, ".gitignore": "sizes.txt\n"})
	run(dir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh",
		"--summarizer", "cmd", "--summarizer-cmd", "sh "+filepath.Join(dir, "sum.sh"), "--progress-budget", "1000", "--max-iterations", strconv.Itoa(n))
	b, err := os.ReadFile(filepath.Join(dir, "sizes.txt"))
	check(err)
	sizes := map[int]int{}
	l3 := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		it, _ := strconv.Atoi(f[0])
		sz, _ := strconv.Atoi(f[1])
		sizes[it], l3[it] = sz, f[2]
	}
	compactions := 0
	for _, ev := range events(dir) {
		if ev["type"] == "progress_compacted" {
			compactions++
		}
	}
	fmt.Printf("\nProgress memory: %d stories, one 200-byte learning each, --progress-budget 1000 tokens, scripted summariser (%d compactions)\n", n, compactions)
	fmt.Printf("%-10s %12s %8s %22s\n", "iteration", "prompt bytes", "ratio", "iteration 3's learning")
	for _, it := range []int{10, 50, 100, 150, 200} {
		fmt.Printf("%-10d %12d %7.2fx %22s\n", it, sizes[it], float64(sizes[it])/float64(sizes[10]), l3[it])
	}
	ratio := float64(sizes[n]) / float64(sizes[10])
	verdict := "met"
	if ratio > 1.2 || l3[n] != "yes" {
		verdict = "NOT met"
	}
	fmt.Printf("goal: iteration %d's prompt <= 1.2x iteration 10's, iteration 3's learning present: %.2fx, %s — %s\n", n, ratio, l3[n], verdict)
}
