package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// The lines the remote agent writes name the worker the dashboards read
// back; other lines name none.
func TestWorkerOfLine(t *testing.T) {
	for _, l := range []string{fmt.Sprintf(takenLine, "run-7-A", "w-1", "vm-a"), fmt.Sprintf(ranLine, "w-1", "vm-a", "run-7-A")} {
		w, host, ok := WorkerOfLine(strings.TrimSuffix(l, "\n"))
		if !ok || w != "w-1" || host != "vm-a" {
			t.Errorf("%q: %q %q %v", l, w, host, ok)
		}
	}
	for _, l := range []string{"[ralph] job run-7-A queued", "[ralph] worker w-1 pushed", "worker w-1 on vm-a ran job x", ""} {
		if _, _, ok := WorkerOfLine(l); ok {
			t.Errorf("%q names a worker", l)
		}
	}
}
