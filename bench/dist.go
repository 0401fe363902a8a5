package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// benchDist measures the distributed backend (issue 17): 24 independent
// stories whose agent sleeps 2 s, a cheap gate; the makespan with 1, 2
// and 4 worker processes of 2 slots each (a coordinator with its embedded
// NATS server and a bare git remote, all on this machine), beside the
// single-process `ralph run --parallel 2` and the lower bound
// ceil(24 / slots) × 2 s.
func benchDist(tmp, bin string) {
	const stories, secs = 24, 2.0
	self, err := os.Executable()
	check(err)
	agentCmd := proc.QuoteArgv([]string{self, "sleep-agent"})
	repo := func(name string) string {
		dir := filepath.Join(tmp, name)
		files := map[string]string{}
		var s []string
		for i := 1; i <= stories; i++ {
			s = append(s, fmt.Sprintf(`{"id":"S-%d","title":"story %d","priority":1}`, i, i))
			files[fmt.Sprintf("times/S-%d", i)] = fmt.Sprintf("%g\n", secs)
		}
		files["prd.json"] = `{"project":"b","branch_name":"ralph/b","user_stories":[` + strings.Join(s, ",\n") + `],"quality_checks":{"test":"true"}}` + "\n"
		newRepo(dir, files)
		return dir
	}
	fmt.Println("\n## Many machines: coordinator and workers (issue 17)")
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
		remote := filepath.Join(tmp, fmt.Sprintf("dist-%d.git", k))
		run(dir, gitEnv, "git", "init", "-q", "--bare", remote)
		run(dir, gitEnv, "git", "push", "-q", remote, "main")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		addr := l.Addr().String()
		l.Close()
		var workers []*exec.Cmd
		for i := 0; i < k; i++ {
			c, _ := command(tmp, gitEnv, bin, "worker", "--nats", "nats://"+addr, "--dir", filepath.Join(tmp, fmt.Sprintf("dist-%d-w%d", k, i)), "--parallel", "2")
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			check(c.Start())
			workers = append(workers, c)
		}
		start := time.Now()
		// --parallel: twice the slots (and two), as the README advises.
		run(dir, gitEnv, bin, "coordinator", "--prd", "prd.json", "--remote", remote, "--listen", addr, "--agent", "cmd", "--agent-cmd", agentCmd,
			"--parallel", strconv.Itoa(4*k+2))
		took := time.Since(start)
		for _, c := range workers {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
			_ = c.Wait()
		}
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

func secs3(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
