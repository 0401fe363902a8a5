package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TagEnv names the environment variable that marks every process started
// for one iteration (and inherited by everything they start), so that what
// an iteration leaves running can be found and stopped — in a parallel run,
// without touching another worker's processes.
const TagEnv = "RALPH_ITERATION_TAG"

type tagKey struct{}

// WithTag returns ctx whose commands (run by Exec) carry the environment
// entries tags (KEY=VALUE).
func WithTag(ctx context.Context, tags ...string) context.Context {
	return context.WithValue(ctx, tagKey{}, append(tagsOf(ctx), tags...))
}

func tagsOf(ctx context.Context) []string {
	t, _ := ctx.Value(tagKey{}).([]string)
	return append([]string(nil), t...)
}

// KillTagged kills every process that carries the environment entry tag
// (KEY=VALUE) — among this process's descendants, or, with anywhere, among
// all processes this user can see (after a crash the orphans of the dead
// run belong to nobody) — and reaps those that are this process's
// children. It returns the pids it killed. Without /proc it finds nothing.
func KillTagged(tag string, anywhere bool) []int {
	self := os.Getpid()
	var killed []int
	for round := 0; round < 5; round++ {
		var found []int
		if kids, ok := descendants(self); ok && !anywhere {
			// The common case, at the end of every iteration: only this
			// process's own tree is read, not every process's.
			for _, pid := range kids {
				if hasEnv(pid, tag) {
					found = append(found, pid)
				}
			}
		} else {
			procs := table()
			for pid, p := range procs {
				if pid == self || !p.alive || (!anywhere && !descends(procs, pid, self)) {
					continue
				}
				if hasEnv(pid, tag) {
					found = append(found, pid)
				}
			}
		}
		if len(found) == 0 {
			break
		}
		for _, pid := range found {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
		reap(killed, self)
	}
	reap(killed, self)
	return killed
}

// reap waits for the killed processes that are this process's children
// (orphans reparented to it as a subreaper); only pids ralph killed itself,
// never a child that os/exec is waiting for.
func reap(pids []int, self int) {
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range pids {
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if got == pid || err != nil || time.Now().After(deadline) {
				break // reaped, or not our child (its parent reaps it)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// descendants lists the live processes below pid from the kernel's
// per-thread children lists (ok=false when the kernel has none: the
// caller reads the whole table instead).
func descendants(pid int) (pids []int, ok bool) {
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		if err != nil {
			if p == pid {
				return nil, false
			}
			continue // it exited meanwhile
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			if err != nil {
				if p == pid && os.IsNotExist(err) {
					return nil, false
				}
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err != nil || seen[c] {
					continue
				}
				seen[c] = true
				queue = append(queue, c)
				if alive(c) {
					pids = append(pids, c)
				}
			}
		}
	}
	return pids, true
}

// alive reports whether pid runs (is neither a zombie nor gone).
func alive(pid int) bool {
	p, ok := readStat(pid)
	return ok && p.alive
}

// readStat reads a process's parent and whether it runs from
// /proc/<pid>/stat (the command name may hold spaces and parentheses:
// the fields start after the last ')').
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procInfo{ppid: ppid, alive: f[0] != "Z" && f[0] != "X"}, true
}

type procInfo struct {
	ppid  int
	alive bool
}

// table reads every process's parent and whether it still runs.
func table() map[int]procInfo {
	out := map[int]procInfo{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			out[pid] = p
		}
	}
	return out
}

func descends(procs map[int]procInfo, pid, ancestor int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		p, ok := procs[pid]
		if !ok {
			return false
		}
		if p.ppid == ancestor {
			return true
		}
		pid = p.ppid
	}
	return false
}

func hasEnv(pid int, kv string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}
