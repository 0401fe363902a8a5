//go:build !linux

package sandbox

import (
	"fmt"
	"os"
)

// initMain: the sandbox (bubblewrap) is Linux's; elsewhere ralph never
// starts one, so nothing asks for its init.
func initMain([]string) int {
	fmt.Fprintln(os.Stderr, "ralph sandbox: the sandbox runs on Linux only")
	return 127
}
