package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ralph-loop/ralph/internal/proc"
)

// InitArg is the hidden first argument that makes ralph's binary the
// sandbox's init: `ralph __sandbox-init [-l ADDR=SOCKET]… -- ARGV…`. It
// listens on the sandbox's own loopback at each ADDR and hands every
// connection to SOCKET (ralph's gateway, outside), then runs ARGV as its
// child and exits with its status.
const InitArg = "__sandbox-init"

// RunInitIfAsked runs the sandbox's init and exits when this process was
// started as one (args are os.Args). Every binary that may be the init —
// ralph itself, and the test binaries that run ralph in process — calls
// it first thing.
func RunInitIfAsked(args []string) {
	if len(args) > 1 && args[1] == InitArg {
		os.Exit(initMain(args[2:]))
	}
}

func initMain(args []string) int {
	var argv []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-l":
			if i+1 >= len(args) {
				return initFail(errors.New("-l needs ADDR=SOCKET"))
			}
			addr, sock, ok := strings.Cut(args[i+1], "=")
			if !ok {
				return initFail(fmt.Errorf("bad listener %q", args[i+1]))
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return initFail(err)
			}
			go forward(ln, sock)
			i++
		case "--":
			argv = args[i+1:]
			i = len(args)
		default:
			return initFail(fmt.Errorf("unknown argument %q", args[i]))
		}
	}
	if len(argv) == 0 {
		return initFail(errors.New("no command"))
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		return initFail(err)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	if code := proc.ExitCode(err); code >= 0 {
		return code
	}
	return initFail(err)
}

func initFail(err error) int {
	fmt.Fprintf(os.Stderr, "ralph sandbox: %v\n", err)
	return 126
}

// forward hands each connection on ln to the unix socket sock.
func forward(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer up.Close()
			splice(c, up, nil)
		}()
	}
}
