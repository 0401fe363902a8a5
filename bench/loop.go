package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// benchLoop compares ralph with the thinnest script that does the same
// work, per passing story, with the sandbox and with --no-sandbox, in one
// run.
//
// Same work: per story, the script runs the agent, the gate and the
// story's check, `git add -A`, `git commit`, and appends a line to a
// progress file — what ralph does per passing story, and nothing more.
// Per iteration that does not pass, the baseline is a bash loop that runs
// the agent and the gate. The three run interleaved (script, ralph
// --no-sandbox, ralph; again …) on fresh copies of the same repository,
// on the disk the temp folder is on and, as an extra row, on a tmpfs;
// medians of BENCH_REPEAT (default 5) repetitions. Processes (by program)
// and fsyncs per story are counted in a separate run of each with strace
// when it is installed (else processes from the kernel's fork counter,
// which counts the whole machine's).
func benchLoop(tmp, bin string) {
	reps := envInt("BENCH_REPEAT", 5)
	const stories = 30
	disks := []struct{ name, dir string }{{"disk (" + diskOf(os.TempDir()) + ")", ""}}
	if tmp != "" && strings.HasPrefix(tmp, "/dev/shm") {
		disks = append(disks, struct{ name, dir string }{"tmpfs", tmp})
	}
	fmt.Println("\n## Per story: ralph, with and without the sandbox, beside the thinnest script")
	fmt.Printf("\n%d stories per run, agent `sh agent.sh` (writes one file, claims), gate `true`, each story's check `test -f out-<id>.txt`; medians of %d interleaved repetitions; %s\n\n", stories, reps, loadLine())
	fmt.Println("| where | measure | thin bash loop | ralph --no-sandbox | ratio | goal | ralph (sandbox) | ratio |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, d := range disks {
		root, err := os.MkdirTemp(d.dir, "ralph-bench-loop-")
		check(err)
		// Per story or iteration within each run, then the median: a run
		// that stopped early is not divided by iterations it never ran.
		pass := make([][]time.Duration, len(storyRunners))
		fail := make([][]time.Duration, len(storyRunners))
		for r := 0; r < reps; r++ {
			for i, v := range storyRunners {
				pass[i] = append(pass[i], timePassing(root, bin, stories, r, v)/stories)
			}
			for i, v := range storyRunners {
				fail[i] = append(fail[i], timeFailing(root, bin, stories, r, v))
			}
		}
		row := func(what string, runs [][]time.Duration, goal float64) {
			script, off, on := median(runs[0]), median(runs[1]), median(runs[2])
			ratio := float64(off) / float64(script)
			// goal 0: measured and shown, with no goal of its own (a
			// failing iteration records the tree and runs the gates on a
			// checkout of it, which the script never does).
			verdict := "no goal"
			if goal > 0 {
				verdict = goalVerdict(ratio <= goal, fmt.Sprintf("≤ %.1f×", goal))
			}
			fmt.Printf("| %s | %s | %s | %s | %.2f | %s | %s | %.2f |\n", d.name, what, ms(script), ms(off), ratio, verdict, ms(on), float64(on)/float64(script))
		}
		row("wall time per passing story", pass, noSandboxGoal)
		row("wall time per iteration that does not pass", fail, 0)
		os.RemoveAll(root)
	}
	fmt.Println("\nThe sandbox's own cost has its goal in the sandbox table (≤ 30 ms more per iteration than --no-sandbox).")
	root, err := os.MkdirTemp("", "ralph-bench-count-")
	check(err)
	defer os.RemoveAll(root)
	fmt.Println("\nPer passing story (the run's start shared out over its stories):")
	fmt.Println()
	fmt.Println("| run | processes | git | bubblewrap | the rest (agent, gates, shell) | fsyncs |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, v := range storyRunners {
		c := countPassing(root, bin, stories, v)
		if c.fsyncs < 0 {
			fmt.Printf("| %s | %.1f | (strace not installed) | | | |\n", v.name, c.procs)
			continue
		}
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", v.name, c.procs, c.git, c.bwrap, c.procs-c.git-c.bwrap, c.fsyncs)
	}
}

// noSandboxGoal is the most a passing story may cost ralph with
// --no-sandbox, as a ratio of the thinnest script doing the same work.
const noSandboxGoal = 1.5

// storyRunner is one way of doing the stories' work: the script, or
// ralph with or without the sandbox.
type storyRunner struct {
	name           string
	ralph, sandbox bool
}

var storyRunners = []storyRunner{{name: "thin bash loop"}, {name: "ralph --no-sandbox", ralph: true}, {name: "ralph (sandbox)", ralph: true, sandbox: true}}

// argv is how the runner runs n stories in a repository of loopRepo
// (ralph's extra flags appended).
func (v storyRunner) argv(bin string, n int, gate string, commit bool, extra ...string) []string {
	if !v.ralph {
		c := "0"
		if commit {
			c = "1"
		}
		return []string{"sh", "thin.sh", strconv.Itoa(n), gate, c}
	}
	argv := append([]string{bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh"}, extra...)
	if !v.sandbox {
		argv = append(argv, "--no-sandbox")
	}
	return argv
}

// repo names the runner's repository of run rep.
func (v storyRunner) repo(what string) string {
	switch {
	case !v.ralph:
		return "script-" + what
	case v.sandbox:
		return "ralph-" + what
	}
	return "ralph-nosandbox-" + what
}

// goalVerdict is "<goal> met" or "<goal> NOT met".
func goalVerdict(met bool, goal string) string {
	if met {
		return goal + " met"
	}
	return goal + " NOT met"
}

// loadLine says how busy the machine was when a table was measured.
func loadLine() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return fmt.Sprintf("%d CPUs", runtime.NumCPU())
	}
	return fmt.Sprintf("%d CPUs, load average %s %s %s", runtime.NumCPU(), f[0], f[1], f[2])
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

// storyPRD is a PRD of n stories with one gate; each story's check is
// that the file its agent writes (made from file, "%s" its id) is there:
// the evidence that the story was done, which every story needs.
func storyPRD(n int, gate, file string) string {
	var s []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("S-%d", i)
		s = append(s, fmt.Sprintf(`{"id":%q,"title":"story %d","priority":%d,"checks":[%q]}`, id, i, 1+i%999, "test -f "+fmt.Sprintf(file, id)))
	}
	return `{"project":"b","branch_name":"ralph/b","user_stories":[` + strings.Join(s, ",\n") + `],"quality_checks":{"test":` + strconv.Quote(gate) + `}}` + "\n"
}

// thinScript does per story what ralph does, and nothing more: the agent,
// the gate, the story's check, a commit and a line of progress.
const thinScript = `n=$1; gate=$2; commit=$3; i=1
while [ $i -le $n ]; do
  RALPH_ITEM_ID=S-$i sh agent.sh < PROMPT.md > /dev/null
  if sh -c "$gate" && test -f "out-S-$i.txt"; then
    if [ "$commit" = 1 ]; then
      git add -A && git commit -qm "feat(S-$i): story $i" && echo "S-$i passed" >> progress.txt
    fi
  fi
  i=$((i+1))
done
`

func loopRepo(root string, rep int, which, gate string, n int) string {
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", which, rep))
	newRepo(dir, map[string]string{"prd.json": storyPRD(n, gate, "out-%s.txt"), "agent.sh": benchAgent,
		"PROMPT.md": strings.Repeat("Work on the story. ", 100) + "\n", "thin.sh": thinScript})
	if strings.HasPrefix(which, "script") {
		run(dir, gitEnv, "git", "checkout", "-q", "-b", "ralph/b")
	}
	return dir
}

// timePassing times n stories that each pass at once.
func timePassing(root, bin string, n, rep int, v storyRunner) time.Duration {
	dir := loopRepo(root, rep, v.repo("pass"), "true", n)
	start := time.Now()
	run(dir, gitEnv, v.argv(bin, n, "true", true)...)
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

func timeFailing(root, bin string, n, rep int, v storyRunner) time.Duration {
	dir := loopRepo(root, rep, v.repo("fail"), failGate, 1)
	if !v.ralph {
		start := time.Now()
		run(dir, gitEnv, v.argv(bin, n, "false", false)...)
		return time.Since(start) / time.Duration(n)
	}
	start := time.Now()
	// It stops at --max-iterations (exit 3) with the story not done, as intended.
	_, _ = runErr(dir, gitEnv, v.argv(bin, n, "", false, "--max-iterations", strconv.Itoa(n), "--max-attempts", strconv.Itoa(n+1),
		"--max-item-iterations", strconv.Itoa(n+1), "--breaker", "0")...)
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

// processCount is what one runner started per passing story.
type processCount struct {
	procs, git, bwrap, fsyncs float64 // fsyncs -1: not counted
}

// countPassing counts the processes started per story, by program, and
// the fsyncs, with strace when it is installed; else the processes from
// the kernel's fork counter (run it on a quiet machine).
func countPassing(root, bin string, n int, v storyRunner) processCount {
	dir := loopRepo(root, 0, v.repo("count"), "true", n)
	argv := v.argv(bin, n, "true", true)
	if _, err := exec.LookPath("strace"); err != nil {
		before := forks()
		run(dir, gitEnv, argv...)
		return processCount{procs: float64(forks()-before) / float64(n), fsyncs: -1}
	}
	trace := filepath.Join(root, v.repo("trace"))
	run(dir, gitEnv, append([]string{"strace", "-f", "-qq", "-z", "-e", "signal=none", "-e", "trace=execve,fsync,fdatasync,sync_file_range", "-o", trace}, argv...)...)
	b, err := os.ReadFile(trace)
	check(err)
	var c processCount
	exe := regexp.MustCompile(`execve\("([^"]*)"`)
	for _, l := range strings.Split(string(b), "\n") {
		if m := exe.FindStringSubmatch(l); m != nil {
			c.procs++
			switch filepath.Base(m[1]) {
			case "git":
				c.git++
			case "bwrap":
				c.bwrap++
			}
		} else if strings.Contains(l, "sync") {
			c.fsyncs++
		}
	}
	c.procs-- // the run's own start
	c.procs, c.git, c.bwrap, c.fsyncs = c.procs/float64(n), c.git/float64(n), c.bwrap/float64(n), c.fsyncs/float64(n)
	return c
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
		// No gates: a task has no check of its own, and a run-wide gate
		// that passes after one task passes at the next one's base, so
		// it could be no task's evidence; the tasks' own cost is what
		// this row measures.
		args = append(args, "--tasks", "tasks.jsonl", "--no-gates")
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
	evs := events(dir)
	os.RemoveAll(dir)
	per, _ := harnessCosts(evs)
	return median(per)
}

// harnessCosts reads a run's event log: ralph's own time in each
// iteration after the first (from its start to the next one's, minus the
// agent's run), and when the first iteration started.
func harnessCosts(evs []map[string]any) (per []time.Duration, first time.Time) {
	var starts []time.Time
	var agent []time.Duration
	for _, ev := range evs {
		switch ev["type"] {
		case "iteration_started":
			t, _ := time.Parse(time.RFC3339Nano, ev["time"].(string))
			starts = append(starts, t)
		case "agent_finished":
			agent = append(agent, time.Duration(ev["data"].(map[string]any)["duration_ms"].(float64)*float64(time.Millisecond)))
		}
	}
	for i := 1; i+1 < len(starts) && i < len(agent); i++ {
		per = append(per, starts[i+1].Sub(starts[i])-agent[i])
	}
	if len(starts) > 0 {
		first = starts[0]
	}
	return per, first
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
