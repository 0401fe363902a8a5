// Command bench prints ralph's benchmark tables. Every number is measured
// beside a baseline in the same run on the same machine; a table with a
// goal prints it beside its numbers. `go run ./bench -h` lists the tables
// (usage below); docs/benchmarks.md explains each.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ralph-loop/ralph/internal/scratch"
)

// usage is what -h prints.
const usage = `Usage: go run ./bench [table]...   (default: every table but schedule:dist and firstbuild)

Every number is measured beside a baseline in the same run on the same
machine; a table with a goal prints it beside its numbers.

  loop      wall time per passing story, ralph with --no-sandbox and
            with the sandbox, vs the thinnest bash script doing the same
            work (goal: --no-sandbox ≤ 1.5×), per iteration that does
            not pass vs a bash loop of agent and gate, and processes per
            story by program
  flat      ralph's own cost of one iteration at 200 and 1,000 stories
            and at 1,000 and 5,000 tasks vs at 10 (goal ≤ 1.3×);
            flat:sequential, flat:parallel, flat:tasks run one loop
  ignored   ralph's own cost of one iteration with 50,000 ignored files
            in node_modules/ vs none (goal ≤ 1.2×), with --no-sandbox
            and with the sandbox
  output    agent output throughput vs cat (goal ≥ 300 MB/s) and
            ralph's peak memory meanwhile (goal < 64 MB)
  parallel  makespan of random 50-story DAGs vs the lower bound (goal
            ≤ 1.15× at 4 workers) and vs a dependency-level schedule
  schedule  time to done of a 12-story DAG, sequential and on 2, 4 and
            8 workers, vs the best schedule of the same DAG (goals:
            4 workers ≤ 1.15×, 8 workers ≤ 1.2×);
            schedule:dist (not in the default set: minutes) a 200-story
            DAG on a coordinator and 8 worker processes vs its lower
            bound (goal ≤ 1.3× with a core per worker) and gate runs
            per landed story (goal ≤ 1.1)
  tasks     ralph task next|complete on 5,000 tasks beside ralph
            --version (goal: complete < 50 ms, peak memory < 64 MB)
  memory    prompt bytes at iteration 200 vs 10 with the progress
            memory (goal ≤ 1.2×), an early learning still present
  sandbox   wall time per passing iteration with the sandbox (agent and
            gate in bubblewrap) vs --no-sandbox (goal: ≤ 30 ms more)
  dist      coordinator and 1, 2, 4 worker processes vs ralph run
            --parallel 2 and the lower bound (goals: 4 workers ≥ 3.2×
            the throughput, makespan ≤ 1.2× the bound)
  firstbuild (not in the default set: minutes) go build ./cmd/ralph
            from an empty build cache and the demo, as go run builds it
            (goal ≤ 45 s together, the modules already downloaded), and
            the same with -tags natsserver for comparison

Environment: BENCH_TMP (where the repositories live), BENCH_REPEAT,
BENCH_FLAT_REPS, BENCH_IGNORED_REPS, BENCH_DIST_STORIES, BENCH_DAGS,
BENCH_N, BENCH_KEEP (see docs/benchmarks.md).
`

func main() {
	for _, a := range os.Args[1:] {
		if a == "-h" || a == "-help" || a == "--help" || a == "help" {
			fmt.Print(usage)
			return
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "sleep-agent" {
		sleepAgent()
		return
	}
	which := os.Args[1:]
	if len(which) == 0 {
		which = []string{"loop", "flat", "ignored", "output", "parallel", "schedule", "tasks", "memory", "dist", "sandbox"}
	}
	tmp, err := os.MkdirTemp(benchTmp(), "ralph-bench-")
	check(err)
	fmt.Printf("Repositories under %s\n", tmp)
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "ralph")
	run("", nil, "go", "build", "-tags", "natsserver", "-o", bin, "./cmd/ralph") // schedule:dist's coordinator embeds its server
	benchSelf = selfCopy(tmp)
	for _, w := range which {
		switch w {
		case "loop":
			benchLoop(tmp, bin)
		case "flat", "flat:sequential", "flat:parallel", "flat:tasks":
			benchFlat(tmp, bin, strings.TrimPrefix(strings.TrimPrefix(w, "flat"), ":"))
		case "output":
			benchOutput(tmp, bin)
		case "parallel":
			benchParallel(tmp, bin)
		case "schedule", "schedule:dist":
			benchSchedule(tmp, bin, strings.TrimPrefix(strings.TrimPrefix(w, "schedule"), ":"))
		case "tasks":
			benchTasks(tmp, bin)
		case "memory":
			benchMemory(tmp, bin)
		case "dist":
			benchDist(tmp, bin)
		case "sandbox":
			benchSandbox(tmp, bin)
		case "ignored":
			benchIgnored(tmp, bin)
		case "firstbuild":
			benchFirstBuild(tmp)
		default:
			fmt.Fprintf(os.Stderr, "bench: unknown benchmark %q (loop, flat[:sequential|parallel|tasks], ignored, output, parallel, schedule[:dist], tasks, memory, dist, sandbox, firstbuild)\n", w)
			os.Exit(2)
		}
	}
}

// benchTmp is where the benchmark's repositories live: $BENCH_TMP when
// set, else a tmpfs when there is one (see scratch.Dir).
func benchTmp() string { return scratch.Dir("BENCH_TMP") }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run runs argv in dir and returns stdout; it exits on failure unless the
// caller allows failure through allowFail.
func run(dir string, env []string, argv ...string) string {
	out, err := runErr(dir, env, argv...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n%s", strings.Join(argv, " "), err, out)
		os.Exit(1)
	}
	return out
}

func runErr(dir string, env []string, argv ...string) (string, error) {
	cmd, out := command(dir, env, argv...)
	err := cmd.Run()
	return out.String(), err
}

// command is argv in dir with env added, output (both streams) collected.
func command(dir string, env []string, argv ...string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var b bytes.Buffer
	cmd.Stdout = &b
	cmd.Stderr = &b
	return cmd, &b
}

// peakRSS runs argv once, untimed, and returns its peak memory in KiB.
// The kernel's peak for a direct child of this program includes this
// program's own (the child begins in this process's memory, and exec keeps
// the higher mark), which after the flat runs exceeds ralph's; so the run
// goes through GNU time, whose small process takes that inheritance, when
// it is installed. Without it the child's rusage figure is returned: an
// upper bound.
func peakRSS(dir string, env []string, argv ...string) int64 {
	var out string
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		f, err := os.CreateTemp("", "bench-rss-")
		check(err)
		f.Close()
		defer os.Remove(f.Name())
		out = f.Name()
		argv = append([]string{"/usr/bin/time", "-f", "%M", "-o", out, "--"}, argv...)
	}
	cmd, b := command(dir, env, argv...)
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n%s", strings.Join(argv, " "), err, b.String())
		os.Exit(1)
	}
	if out != "" {
		text, _ := os.ReadFile(out)
		lines := strings.Fields(string(text))
		if len(lines) > 0 {
			if kb, err := strconv.ParseInt(lines[len(lines)-1], 10, 64); err == nil {
				return kb
			}
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}

var gitEnv = []string{"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@example.com"}

func newRepo(dir string, files map[string]string) {
	check(os.MkdirAll(dir, 0o755))
	for name, content := range files {
		p := filepath.Join(dir, name)
		check(os.MkdirAll(filepath.Dir(p), 0o755))
		check(os.WriteFile(p, []byte(content), 0o644))
	}
	run(dir, gitEnv, "git", "init", "-q", "-b", "main")
	run(dir, gitEnv, "git", "add", "-A")
	run(dir, gitEnv, "git", "commit", "-qm", "init")
}

// events reads .ralph/events.jsonl.
func events(dir string) []map[string]any {
	b, err := os.ReadFile(filepath.Join(dir, ".ralph", "events.jsonl"))
	check(err)
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
