package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// benchDist measures the distributed backend: 24 independent
// stories whose agent sleeps 2 s, a cheap gate; the makespan with 1, 2
// and 4 worker processes of 2 slots each (a coordinator with its embedded
// NATS server and a bare git remote, all on this machine), beside the
// single-process `ralph run --parallel 2` and the lower bound
// ceil(24 / slots) × 2 s.
func benchDist(tmp, bin string) {
	const stories, secs = 24, 2.0
	agentCmd := sleepAgentCmd()
	repo := func(name string) string {
		dir := filepath.Join(tmp, name)
		files := map[string]string{}
		var s []string
		for i := 1; i <= stories; i++ {
			s = append(s, fmt.Sprintf(`{"id":"S-%d","title":"story %d","priority":1,"checks":["test -f out-S-%d.txt"]}`, i, i, i))
			files[fmt.Sprintf("times/S-%d", i)] = fmt.Sprintf("%g\n", secs)
		}
		files["prd.json"] = `{"project":"b","branch_name":"ralph/b","user_stories":[` + strings.Join(s, ",\n") + `],"quality_checks":{"test":"true"}}` + "\n"
		newRepo(dir, files)
		return dir
	}
	fmt.Println("\n## Many machines: coordinator and workers")
	fmt.Printf("\n%d independent stories, agent sleeps %gs, gate `true`; workers of 2 slots on this machine over loopback\n\n", stories, secs)
	fmt.Println("| run | slots | makespan | lower bound | makespan / bound | throughput vs single |")
	fmt.Println("|---|---|---|---|---|---|")
	bound := func(slots int) time.Duration {
		return time.Duration(float64((stories+slots-1)/slots) * secs * float64(time.Second))
	}
	dir := repo("dist-single")
	start := time.Now()
	run(dir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", agentCmd, "--parallel", "2")
	single := time.Since(start)
	fmt.Printf("| ralph run --parallel 2 | 2 | %s | %s | %.2f | 1.00 |\n", secs3(single), secs3(bound(2)), float64(single)/float64(bound(2)))
	var four time.Duration
	for _, k := range []int{1, 2, 4} {
		dir := repo(fmt.Sprintf("dist-%d", k))
		// --parallel: twice the slots (and two), as the README advises.
		took := coordinate(tmp, bin, dir, k, 2, 4*k+2, agentCmd)
		if k == 4 {
			four = took
		}
		fmt.Printf("| coordinator + %d worker(s) | %d | %s | %s | %.2f | %.2f |\n", k, 2*k, secs3(took), secs3(bound(2*k)), float64(took)/float64(bound(2*k)), float64(single)/float64(took))
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("\nGoals: 4 workers ≥ 3.2× the single process's throughput: %.2f× (%s); makespan ≤ 1.2× the lower bound: %.2f× (%s).\n",
		float64(single)/float64(four), verdict(float64(single)/float64(four) >= 3.2), float64(four)/float64(bound(8)), verdict(float64(four) <= 1.2*float64(bound(8))))
}

// coordinate runs `ralph coordinator` over the PRD in dir (with a bare
// remote beside it) and the given number of `ralph worker` processes of
// slots each, all on this machine over loopback, and returns the
// coordinator's time to done; the workers are stopped after it.
func coordinate(tmp, bin, dir string, workers, slots, parallel int, agentCmd string) time.Duration {
	remote := dir + ".git"
	run(dir, gitEnv, "git", "init", "-q", "--bare", remote)
	run(dir, gitEnv, "git", "push", "-q", remote, "main")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := l.Addr().String()
	l.Close()
	// The coordinator's embedded server admits only clients with its token.
	secret := make([]byte, 16)
	_, err = rand.Read(secret)
	check(err)
	token := hex.EncodeToString(secret)
	var procs []*exec.Cmd
	for i := 0; i < workers; i++ {
		c, _ := command(tmp, append(slices.Clip(gitEnv), "RALPH_NATS_TOKEN="+token), bin, "worker", "--nats", "nats://"+addr, "--dir", fmt.Sprintf("%s-w%d", dir, i), "--parallel", strconv.Itoa(slots))
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		check(c.Start())
		procs = append(procs, c)
	}
	start := time.Now()
	run(dir, gitEnv, bin, "coordinator", "--prd", "prd.json", "--remote", remote, "--listen", addr, "--token", token, "--agent", "cmd", "--agent-cmd", agentCmd,
		"--parallel", strconv.Itoa(parallel))
	took := time.Since(start)
	// All stopped at once: each takes seconds to wind down.
	for _, c := range procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
	for _, c := range procs {
		_ = c.Wait()
	}
	return took
}

func secs3(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
