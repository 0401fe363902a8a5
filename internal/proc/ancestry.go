package proc

import (
	"bytes"
	"fmt"
	"os"
)

// Ancestors lists pid's parent, its parent's parent and so on up to (not
// including) init, read from /proc/<pid>/stat; nil without /proc.
func Ancestors(pid int) []int {
	var out []int
	for i := 0; i < 64; i++ {
		p, ok := readStat(pid)
		if !ok || p.ppid <= 1 {
			break
		}
		out = append(out, p.ppid)
		pid = p.ppid
	}
	return out
}

// EnvHasKey reports whether process pid was started with the environment
// variable key set (its /proc/<pid>/environ: what it was started with,
// which a process cannot take back from its own record).
func EnvHasKey(pid int, key string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(e, []byte(key+"=")) {
			return true
		}
	}
	return false
}
