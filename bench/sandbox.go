package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
)

// sandboxGoal is what the sandbox may add to one iteration (agent and
// gate confined, the agent's proxy opened and closed) on a quiet
// machine; under load it may cost at most sandboxLoadGoal times the
// unconfined iteration.
const (
	sandboxGoal     = 30 * time.Millisecond
	sandboxLoadGoal = 2.0
)

// benchSandbox times iterations that pass at once (a cmd agent writing
// one file, one gate), with the sandbox (the default) and with
// --no-sandbox, alternating runs of the same repository shape, on the
// machine as it is and again with every CPU kept busy; then what the
// private home costs (seeded once per run) beside what an overlay of the
// user's home would cost per sandbox start.
func benchSandbox(tmp, bin string) {
	n := envInt("BENCH_SANDBOX_STORIES", 20)
	reps := benchRepeat(5)
	root := filepath.Join(tmp, "sandbox")
	fmt.Printf("\n## Sandbox: cost per iteration (%d passing stories, agent and gate confined, median of %d runs)\n\n", n, reps)
	fmt.Println("| machine | without sandbox | with sandbox | cost | ratio | goal |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, loaded := range []bool{false, true} {
		var stop func()
		if loaded {
			stop = cpuLoad(runtime.NumCPU())
		}
		on, off := sandboxIterations(root, bin, n, reps, loaded)
		if stop != nil {
			stop()
		}
		ratio := float64(on) / float64(off)
		machine, verdict := "as it is", fmt.Sprintf("≤ %s more met", ms(sandboxGoal))
		if on-off > sandboxGoal {
			verdict = fmt.Sprintf("≤ %s more NOT met", ms(sandboxGoal))
		}
		if loaded {
			machine, verdict = fmt.Sprintf("every CPU busy (%d)", runtime.NumCPU()), fmt.Sprintf("≤ %.0f× met", sandboxLoadGoal)
			if ratio > sandboxLoadGoal {
				verdict = fmt.Sprintf("≤ %.0f× NOT met", sandboxLoadGoal)
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %.2f× | %s |\n", machine, ms(off), ms(on), ms(on-off), ratio, verdict)
	}
	benchSandboxHome(filepath.Join(tmp, "sandbox-home"))
}

// sandboxIterations is the median time per iteration with and without
// the sandbox.
func sandboxIterations(root, bin string, n, reps int, loaded bool) (on, off time.Duration) {
	var ons, offs []time.Duration
	dirs := map[bool]string{}
	for rep := 0; rep < reps; rep++ {
		for _, confined := range []bool{false, true} {
			// One repository per mode, run afresh each time: its private
			// homes are kept between runs, as a user's are (the first
			// run's seeding is in the table below).
			dir := dirs[confined]
			if dir == "" {
				name := map[bool]string{true: "ralph-sandbox", false: "ralph-nosandbox"}[confined]
				if loaded {
					name += "-loaded"
				}
				dir = loopRepo(root, 0, name, "true", n)
				dirs[confined] = dir
			} else {
				run(dir, gitEnv, "git", "checkout", "-q", "main")
				run(dir, gitEnv, "git", "branch", "-q", "-D", "ralph/b")
			}
			argv := []string{bin, "run", "--fresh", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh"}
			if !confined {
				argv = append(argv, "--no-sandbox")
			}
			start := time.Now()
			run(dir, gitEnv, argv...)
			per := time.Since(start) / time.Duration(n)
			if confined {
				ons = append(ons, per)
			} else {
				offs = append(offs, per)
			}
		}
	}
	return median(ons), median(offs)
}

// cpuLoad keeps n CPUs busy until stop is called.
func cpuLoad(n int) (stop func()) {
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		c := exec.Command("sh", "-c", "while :; do :; done")
		check(c.Start())
		cmds = append(cmds, c)
	}
	return func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// benchSandboxHome times the private home: seeding it in a run's first
// sandbox (a home of typical size: dotfiles, ~/.cache, ~/.config and
// ~/.local entries), refreshing it in the next run's, and a sandbox
// start once it is seeded, beside a bare bubblewrap start and, for the
// choice docs/sandbox.md explains, an overlay of the same home mounted
// in a user namespace of its own (what each sandbox start would pay
// instead; bubblewrap before 0.9 cannot mount one).
func benchSandboxHome(dir string) {
	home := filepath.Join(dir, "home")
	for i := 0; i < 30; i++ {
		writeFile(filepath.Join(home, fmt.Sprintf(".dotfile%02d", i)), "x\n")
	}
	for _, sub := range []string{".cache", ".config", ".local/share", ".local/state", ".npm", ".cargo/registry", "go/pkg/mod"} {
		for i := 0; i < 15; i++ {
			writeFile(filepath.Join(home, sub, fmt.Sprintf("tool%02d", i), "f"), "x\n")
		}
	}
	repo := filepath.Join(dir, "repo")
	newRepo(repo, map[string]string{"a.txt": "a\n"})
	for k, v := range map[string]string{"HOME": home, "XDG_CACHE_HOME": "", "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "", "XDG_STATE_HOME": ""} {
		old, had := os.LookupEnv(k)
		check(os.Setenv(k, v))
		defer func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		}()
	}
	open := func(sb *sandbox.Sandbox) time.Duration {
		start := time.Now()
		ss, err := sb.Open(sandbox.Use{Label: "bench", Dir: repo})
		check(err)
		d := time.Since(start)
		ss.Close()
		return d
	}
	newSandbox := func() *sandbox.Sandbox {
		sb, err := sandbox.New(sandbox.Policy{})
		check(err)
		return sb
	}
	seed := open(newSandbox())
	var refresh, cached, confined, bare []time.Duration
	for i := 0; i < 10; i++ {
		sb := newSandbox()
		refresh = append(refresh, open(sb))
		cached = append(cached, open(sb))
		ss, err := sb.Open(sandbox.Use{Label: "bench", Dir: repo})
		check(err)
		ctx := proc.WithConfiner(context.Background(), ss)
		start := time.Now()
		_, err = proc.Exec{}.Run(ctx, proc.Cmd{Argv: []string{"true"}, Dir: repo})
		check(err)
		confined = append(confined, time.Since(start))
		ss.Close()
		bw, _ := sandbox.Bwrap()
		start = time.Now()
		run(repo, nil, bw, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net", "true")
		bare = append(bare, time.Since(start))
	}
	fmt.Printf("\n## Sandbox: the private home (a home of %d entries; median of 10)\n\n", countEntries(home))
	fmt.Println("| seeded in a run's first sandbox | refreshed in the next run's | a sandbox's private home once seeded | a confined `true` | a bare bubblewrap `true` |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| %s | %s | %s | %s | %s |\n", ms(seed), ms(median(refresh)), ms(median(cached)), ms(median(confined)), ms(median(bare)))
	overlay, plain, why := overlayCost(home, dir)
	fmt.Println("\n| an overlay of the home per sandbox start (user namespace, kernel overlayfs) | the same namespace without it | overlay's cost per start | bubblewrap here |")
	fmt.Println("|---|---|---|---|")
	bwVersion := "no --overlay (needs bubblewrap ≥ 0.9)"
	if bw, err := sandbox.Bwrap(); err == nil {
		if out, err := exec.Command(bw, "--help").CombinedOutput(); err == nil && strings.Contains(string(out), "--overlay") {
			bwVersion = "has --overlay"
		}
	}
	if why != "" {
		fmt.Printf("| n/a (%s) | %s | n/a | %s |\n", why, ms(plain), bwVersion)
		return
	}
	fmt.Printf("| %s | %s | %s | %s |\n", ms(overlay), ms(plain), ms(overlay-plain), bwVersion)
}

// overlayCost times `unshare -rm` with and without an overlay of home
// mounted in it.
func overlayCost(home, dir string) (overlay, plain time.Duration, why string) {
	if _, err := exec.LookPath("unshare"); err != nil {
		return 0, 0, "no unshare"
	}
	up, work, merged := filepath.Join(dir, "up"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{up, work, merged} {
		check(os.MkdirAll(d, 0o755))
	}
	mount := fmt.Sprintf("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s && ls %s > /dev/null", home, up, work, merged, merged)
	var with, without []time.Duration
	for i := 0; i < 10; i++ {
		start := time.Now()
		if out, err := exec.Command("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount).CombinedOutput(); err != nil {
			return 0, 0, strings.TrimSpace(string(out))
		}
		with = append(with, time.Since(start))
		start = time.Now()
		if err := exec.Command("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "ls "+home+" > /dev/null").Run(); err != nil {
			return 0, 0, err.Error()
		}
		without = append(without, time.Since(start))
	}
	return median(with), median(without), ""
}

func countEntries(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil })
	return n - 1
}

func writeFile(p, content string) {
	check(os.MkdirAll(filepath.Dir(p), 0o755))
	check(os.WriteFile(p, []byte(content), 0o644))
}
