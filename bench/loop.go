package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// benchLoop compares ralph with the thinnest script that does the same
// work, and measures how ralph's own cost per iteration grows with the
// size of the PRD.
//
// Same work: per story, the script runs the agent, runs the gate, `git add
// -A`, `git commit`, and appends a line to a progress file — what ralph
// does per passing story, and nothing more. Per iteration that does not
// pass, the baseline is a bash loop that runs the agent and the gate. The
// two run interleaved (A B A B …) on fresh copies of the same repository,
// on the disk the temp folder is on and, as an extra row, on a tmpfs;
// medians of BENCH_REPEAT (default 5) repetitions. Processes and fsyncs
// per story are counted in a separate run of each (processes from the
// kernel's fork counter, fsyncs with strace when it is installed).
func benchLoop(tmp, bin string) {
	reps := envInt("BENCH_REPEAT", 5)
	const stories = 30
	disks := []struct{ name, dir string }{{"disk (" + diskOf(os.TempDir()) + ")", ""}}
	if tmp != "" && strings.HasPrefix(tmp, "/dev/shm") {
		disks = append(disks, struct{ name, dir string }{"tmpfs", tmp})
	}
	fmt.Println("\n## Same work: ralph beside the thinnest script")
	fmt.Printf("\n%d stories per run, agent `sh agent.sh` (writes one file, claims), gate `true`; medians of %d interleaved repetitions\n\n", stories, reps)
	fmt.Println("| where | measure | script | ralph | ratio | goal |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, d := range disks {
		root, err := os.MkdirTemp(d.dir, "ralph-bench-loop-")
		check(err)
		// Per story or iteration within each run, then the median: a run
		// that stopped early is not divided by iterations it never ran.
		var scriptPass, ralphPass, scriptFail, ralphFail []time.Duration
		for r := 0; r < reps; r++ {
			scriptPass = append(scriptPass, timePassing(root, bin, stories, r, false)/stories)
			ralphPass = append(ralphPass, timePassing(root, bin, stories, r, true)/stories)
			scriptFail = append(scriptFail, timeFailing(root, bin, stories, r, false))
			ralphFail = append(ralphFail, timeFailing(root, bin, stories, r, true))
		}
		sp, rp := median(scriptPass), median(ralphPass)
		sf, rf := median(scriptFail), median(ralphFail)
		row := func(what string, s, r time.Duration, goal float64) {
			ratio := float64(r) / float64(s)
			// goal 0: measured and shown, with no goal of its own (a
			// failing iteration stages and snapshots the tree for the
			// verified commit, which the script never does).
			verdict := "no goal"
			if goal > 0 {
				verdict = fmt.Sprintf("≤ %.1f met", goal)
				if ratio > goal {
					verdict = fmt.Sprintf("≤ %.1f NOT met", goal)
				}
			}
			fmt.Printf("| %s | %s | %s | %s | %.2f | %s |\n", d.name, what, ms(s), ms(r), ratio, verdict)
		}
		row("wall time per passing story", sp, rp, 1.3)
		row("wall time per iteration that does not pass", sf, rf, 0)
		os.RemoveAll(root)
	}
	root, err := os.MkdirTemp("", "ralph-bench-count-")
	check(err)
	defer os.RemoveAll(root)
	sProcs, sSyncs := countPassing(root, bin, stories, false)
	rProcs, rSyncs := countPassing(root, bin, stories, true)
	fmt.Printf("\nPer passing story: the script starts %.1f processes and makes %s fsyncs; ralph %.1f processes and %s fsyncs.\n",
		sProcs, syncs(sSyncs), rProcs, syncs(rSyncs))
}

// flatGoal is the most one iteration may cost at the largest size, as a
// ratio of its cost at 10 items.
const flatGoal = 1.3

// benchFlat measures the harness's own cost of one iteration at growing
// numbers of items, up to the sizes runs have (1,000 stories, 5,000
// tasks), for each kind of loop; only names one loop of it (flat:tasks).
func benchFlat(tmp, bin, only string) {
	root, err := os.MkdirTemp(tmp, "flat-")
	check(err)
	defer os.RemoveAll(root)
	fmt.Println("\n## Flat in the number of items")
	reps := envInt("BENCH_FLAT_REPS", 3)
	fmt.Printf("\nSteady-state harness cost of one iteration (time between iteration starts minus the agent's run; median over up to 30 iterations of a run, then the median of %d runs per size, the sizes interleaved), items that pass\n\n", reps)
	fmt.Println("| loop | items | per iteration | ratio to 10 | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, loop := range []struct {
		name  string
		sizes []int
	}{{"sequential PRD", []int{10, 200, 1000}}, {"parallel PRD (--parallel 2)", []int{10, 200, 1000}}, {"tasks", []int{10, 1000, 5000}}, {"tasks, n/2 more archived", []int{10, 1000, 5000}}} {
		if only != "" && !strings.HasPrefix(loop.name, only) {
			continue
		}
		runs := make([][]time.Duration, len(loop.sizes))
		for r := 0; r < reps; r++ {
			for i, n := range loop.sizes {
				runs[i] = append(runs[i], steadyCost(root, bin, loop.name, n, r))
			}
		}
		var base time.Duration
		for i, n := range loop.sizes {
			per := median(runs[i])
			if i == 0 {
				base = per
			}
			ratio := float64(per) / float64(base)
			verdict := ""
			if i == len(loop.sizes)-1 {
				verdict = fmt.Sprintf("≤ %.1f met", flatGoal)
				if ratio > flatGoal {
					verdict = fmt.Sprintf("≤ %.1f NOT met", flatGoal)
				}
			}
			fmt.Printf("| %s | %d | %s | %.2f | %s |\n", loop.name, n, ms(per), ratio, verdict)
		}
	}
}

const benchAgent = "cat > /dev/null; echo \"$RALPH_ITEM_ID\" > \"out-$RALPH_ITEM_ID.txt\"; echo '<promise>COMPLETE</promise>'\n"

// storyPRD is a PRD of n stories with one gate.
func storyPRD(n int, gate string) string {
	var s []string
	for i := 1; i <= n; i++ {
		s = append(s, fmt.Sprintf(`{"id":"S-%d","title":"story %d","priority":%d}`, i, i, 1+i%999))
	}
	return `{"project":"b","branch_name":"ralph/b","user_stories":[` + strings.Join(s, ",\n") + `],"quality_checks":{"test":` + strconv.Quote(gate) + `}}` + "\n"
}

// thinScript does per story what ralph does, and nothing more.
const thinScript = `n=$1; gate=$2; commit=$3; i=1
while [ $i -le $n ]; do
  RALPH_ITEM_ID=S-$i sh agent.sh < PROMPT.md > /dev/null
  if sh -c "$gate"; then
    if [ "$commit" = 1 ]; then
      git add -A && git commit -qm "feat(S-$i): story $i" && echo "S-$i passed" >> progress.txt
    fi
  fi
  i=$((i+1))
done
`

func loopRepo(root string, rep int, which, gate string, n int) string {
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", which, rep))
	newRepo(dir, map[string]string{"prd.json": storyPRD(n, gate), "agent.sh": benchAgent,
		"PROMPT.md": strings.Repeat("Work on the story. ", 100) + "\n", "thin.sh": thinScript})
	if strings.HasPrefix(which, "script") {
		run(dir, gitEnv, "git", "checkout", "-q", "-b", "ralph/b")
	}
	return dir
}

// timePassing times n stories that each pass at once.
func timePassing(root, bin string, n, rep int, ralph bool) time.Duration {
	if ralph {
		dir := loopRepo(root, rep, "ralph-pass", "true", n)
		start := time.Now()
		run(dir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
		return time.Since(start)
	}
	dir := loopRepo(root, rep, "script-pass", "true", n)
	start := time.Now()
	run(dir, gitEnv, "sh", "thin.sh", strconv.Itoa(n), "true", "1")
	return time.Since(start)
}

// timeFailing is the wall time per iteration of n iterations whose gate
// fails: one story, with every limit that would block it before n
// iterations raised; ralph's time is divided by the iterations its event
// log shows it ran, so a run that stops early is not read as cheap ones.
// failGate passes on the untouched base (ralph runs the gates there
// before any agent) and fails once the agent wrote its file: every
// iteration then fails, for ralph and the script alike.
const failGate = "test ! -e out-S-1.txt"

func timeFailing(root, bin string, n, rep int, ralph bool) time.Duration {
	if ralph {
		dir := loopRepo(root, rep, "ralph-fail", failGate, 1)
		start := time.Now()
		// It stops at --max-iterations (exit 3) with the story not done, as intended.
		_, _ = runErr(dir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh",
			"--max-iterations", strconv.Itoa(n), "--max-attempts", strconv.Itoa(n+1),
			"--max-item-iterations", strconv.Itoa(n+1), "--breaker", "0")
		took := time.Since(start)
		ran := 0
		for _, ev := range events(dir) {
			if ev["type"] == "iteration_started" {
				ran++
			}
		}
		if ran != n {
			fmt.Fprintf(os.Stderr, "bench: ralph ran %d failing iterations, not %d\n", ran, n)
		}
		return took / time.Duration(max(ran, 1))
	}
	dir := loopRepo(root, rep, "script-fail", failGate, 1)
	start := time.Now()
	run(dir, gitEnv, "sh", "thin.sh", strconv.Itoa(n), "false", "0")
	return time.Since(start) / time.Duration(n)
}

// countPassing counts processes started (the kernel's fork counter: run
// it on a quiet machine) and fsyncs (strace, when installed) per story.
func countPassing(root, bin string, n int, ralph bool) (procs float64, fsyncs float64) {
	which := "script-count"
	argv := []string{"sh", "thin.sh", strconv.Itoa(n), "true", "1"}
	if ralph {
		which = "ralph-count"
		argv = []string{bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh"}
	}
	dir := loopRepo(root, 0, which, "true", n)
	before := forks()
	run(dir, gitEnv, argv...)
	procs = float64(forks()-before) / float64(n)
	fsyncs = -1
	if _, err := exec.LookPath("strace"); err == nil {
		dir = loopRepo(root, 1, which, "true", n)
		out := run(dir, gitEnv, append([]string{"strace", "-f", "-c", "-e", "trace=fsync,fdatasync,sync_file_range"}, argv...)...)
		total := 0
		for _, m := range regexp.MustCompile(`(?m)^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)(?:\s+\d+)?\s+(fsync|fdatasync|sync_file_range)$`).FindAllStringSubmatch(out, -1) {
			c, _ := strconv.Atoi(m[1])
			total += c
		}
		fsyncs = float64(total) / float64(n)
	}
	return procs, fsyncs
}

func syncs(f float64) string {
	if f < 0 {
		return "(strace not installed)"
	}
	return fmt.Sprintf("%.1f", f)
}

// forks is the number of processes the machine has started since boot.
func forks() int {
	b, err := os.ReadFile("/proc/stat")
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "processes "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// steadyCost is the median harness time of one iteration in run rep over
// n items: from one iteration's start to the next's, minus the agent's
// run, over 30 iterations after the first.
func steadyCost(root, bin, loop string, n, rep int) time.Duration {
	const iters = 31
	args := []string{"run", "--agent", "cmd", "--agent-cmd", "sh agent.sh", "--max-iterations", strconv.Itoa(iters)}
	var dir string
	env := gitEnv
	switch {
	case strings.HasPrefix(loop, "tasks"):
		// "with an archive": n/2 more tasks already archived, as in a run
		// that has done a third of its tree (the same n pending tasks, so
		// the same number of iterations as the plain row).
		archived := 0
		if strings.Contains(loop, "archive") {
			archived = n / 2
		}
		dir = filepath.Join(root, fmt.Sprintf("flat-tasks-%d-%d-%d", n, archived, rep))
		var b, done strings.Builder
		for i := 1; i <= archived; i++ {
			fmt.Fprintf(&done, `{"id":"A%06d","title":"task %d","status":"complete","leaf":true,"completed":"2026-01-02T03:04:05Z","commit":"0123456789abcdef0123456789abcdef01234567"}`+"\n", i, i)
		}
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, `{"id":"T%06d","title":"task %d","status":"pending","leaf":true}`+"\n", i, i)
		}
		files := map[string]string{"tasks.jsonl": b.String(),
			"agent.sh": benchAgent + "ralph task complete \"$RALPH_ITEM_ID\" > /dev/null\n"}
		if archived > 0 {
			files["tasks-done.jsonl"] = done.String()
		}
		newRepo(dir, files)
		args = append(args, "--tasks", "tasks.jsonl", "--gate", "check=true")
		env = append(append([]string{}, gitEnv...), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	case strings.HasPrefix(loop, "parallel"):
		dir = loopRepo(root, n*100+rep, "flat-parallel", "true", n)
		args = append(args, "--prd", "prd.json", "--parallel", "2")
	default:
		dir = loopRepo(root, n*100+rep, "flat", "true", n)
		args = append(args, "--prd", "prd.json")
	}
	// It stops at --max-iterations (exit 3) with work left, as intended.
	_, _ = runErr(dir, env, append([]string{bin}, args...)...)
	var starts []time.Time
	var agent []time.Duration
	evs := events(dir)
	os.RemoveAll(dir)
	for _, ev := range evs {
		switch ev["type"] {
		case "iteration_started":
			t, _ := time.Parse(time.RFC3339Nano, ev["time"].(string))
			starts = append(starts, t)
		case "agent_finished":
			agent = append(agent, time.Duration(ev["data"].(map[string]any)["duration_ms"].(float64)*float64(time.Millisecond)))
		}
	}
	var per []time.Duration
	for i := 1; i+1 < len(starts) && i < len(agent); i++ {
		per = append(per, starts[i+1].Sub(starts[i])-agent[i])
	}
	return median(per)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// diskOf names the file system a folder is on (from /proc/mounts).
func diskOf(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	best, fs := "", "unknown"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && strings.HasPrefix(dir, f[1]) && len(f[1]) > len(best) {
			best, fs = f[1], f[2]
		}
	}
	return fs
}
