// Package scratch chooses where the benchmark and the kill -9 campaign put
// their throw-away repositories.
package scratch

import "os"

// Dir is the folder for throw-away repositories: $env when set, else a
// tmpfs (/dev/shm) when there is a writable one, else "" (the system's
// temp folder). A tmpfs keeps the numbers about ralph and git rather than
// the disk: on an ext4 without a journal (as on this project's CI
// machines), creating a file scans past every inode deleted in the last
// minutes, so each run's git lock and temp files slow the next ones down.
func Dir(env string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", ".ralph-scratch-probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return ""
}
