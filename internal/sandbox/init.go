package sandbox

import (
	"os"
)

// InitArg is the hidden first argument that makes ralph's binary the
// sandbox's init: `ralph __sandbox-init [-l ADDR=SOCKET]… [-r FILE] --
// ARGV…`. It listens on the sandbox's own loopback at each ADDR and hands
// every connection to SOCKET (ralph's gateway, outside), binds each path
// FILE lists (NUL-separated) read-only over itself, then runs ARGV as its
// child, without any capability, and exits with its status.
const InitArg = "__sandbox-init"

// RunInitIfAsked runs the sandbox's init (or its Go cache program,
// GoCacheArg) and exits when this process was started as one (args are
// os.Args). Every binary that may be the init —
// ralph itself, and the test binaries that run ralph in process — calls
// it first thing.
func RunInitIfAsked(args []string) {
	if len(args) > 1 && args[1] == InitArg {
		os.Exit(initMain(args[2:]))
	}
	if len(args) > 1 && args[1] == GoCacheArg {
		os.Exit(goCacheMain(args[2:]))
	}
}
