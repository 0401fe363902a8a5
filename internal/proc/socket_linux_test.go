package proc

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// With SocketOutput, a process cannot write into its parent's output by
// opening it again through /proc (the command's own output still gets
// through, and stderr with it); without, it can — the control.
func TestSocketOutputCannotBeReopened(t *testing.T) {
	script := `echo own; echo err >&2; sh -c 'echo forged > /proc/$PPID/fd/1' 2>/dev/null; echo rc=$?`
	for _, socket := range []bool{true, false} {
		var out bytes.Buffer
		res, err := Exec{}.Run(context.Background(), Cmd{Argv: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out, SocketOutput: socket})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v %+v", err, res)
		}
		got := out.String()
		if !strings.Contains(got, "own\n") || !strings.Contains(got, "err\n") {
			t.Fatalf("socket %v: the command's own output is missing: %q", socket, got)
		}
		if forged := strings.Contains(got, "forged"); forged == socket {
			t.Fatalf("socket %v: forged line written: %v (%q)", socket, forged, got)
		}
	}
}

// Separate writers get separate sockets, each read whole.
func TestSocketOutputSeparateWriters(t *testing.T) {
	var out, errOut bytes.Buffer
	big := strings.Repeat("x", 1<<20)
	res, err := Exec{}.Run(context.Background(), Cmd{Argv: []string{"sh", "-c", `head -c 1048576 /dev/zero | tr '\0' x; echo e >&2`},
		Stdout: &out, Stderr: &errOut, SocketOutput: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if out.String() != big || errOut.String() != "e\n" {
		t.Fatalf("stdout %d bytes, stderr %q", out.Len(), errOut.String())
	}
}
