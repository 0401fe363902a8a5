package proc

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// drainWait is how long a command's output is still read after it
// ended: a process it left running (out of its group) may hold the
// output open.
const drainWait = 2 * time.Second

// socketOutputs gives cmd one end of a socket pair for each of stdout
// and stderr (one for both when they are the same writer), copied to
// them by a goroutine each (Cmd.SocketOutput). The returned drain,
// called after the command ended, closes ralph's copy of the writing
// ends and waits until the output is read (at most drainWait). A writer
// that is nil keeps exec's default; a socket pair that cannot be made
// leaves exec's pipe.
func socketOutputs(cmd *exec.Cmd, stdout, stderr io.Writer) (drain func()) {
	var drains []func()
	give := func(w io.Writer) *os.File {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		r, wr := os.NewFile(uintptr(fds[0]), "output"), os.NewFile(uintptr(fds[1]), "output")
		read := make(chan struct{})
		go func() {
			_, _ = io.Copy(w, r)
			close(read)
		}()
		drains = append(drains, func() {
			_ = wr.Close()
			select {
			case <-read:
			case <-time.After(drainWait):
				_ = r.Close()
				<-read
			}
			_ = r.Close()
		})
		return wr
	}
	if stdout != nil {
		if f := give(stdout); f != nil {
			cmd.Stdout = f
			if SameWriter(stdout, stderr) {
				cmd.Stderr = f
			}
		}
	}
	if stderr != nil && !SameWriter(stdout, stderr) {
		if f := give(stderr); f != nil {
			cmd.Stderr = f
		}
	}
	return func() {
		for _, d := range drains {
			d()
		}
	}
}
