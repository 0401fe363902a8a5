//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/ralph-loop/ralph/internal/proc"
	"golang.org/x/sys/unix"
)

func initMain(args []string) int {
	var argv []string
	readOnly := ""
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
		case "-r":
			if i+1 >= len(args) {
				return initFail(errors.New("-r needs a FILE"))
			}
			readOnly = args[i+1]
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
	if readOnly != "" {
		// The command starts from this thread, which gives up its
		// capabilities (and the bounding set) first.
		runtime.LockOSThread()
		if err := bindReadOnly(readOnly); err != nil {
			return initFail(err)
		}
		if err := dropCapabilities(); err != nil {
			return initFail(err)
		}
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

// bindReadOnly binds each path the file lists (NUL-separated) read-only
// over itself; a path that is not there is skipped.
func bindReadOnly(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for _, p := range strings.Split(string(b), "\x00") {
		if p == "" {
			continue
		}
		if err := syscall.Mount(p, p, "", syscall.MS_BIND, ""); err != nil {
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
				continue
			}
			return fmt.Errorf("keeping %s read-only: %w", p, err)
		}
		if err := remount(p, true); err != nil {
			return fmt.Errorf("keeping %s read-only: %w", p, err)
		}
	}
	return nil
}

// remount sets the mount at p read-only or writable, keeping the flags a
// user namespace locked (nosuid, nodev, noexec on a temp folder).
func remount(p string, readOnly bool) error {
	var st syscall.Statfs_t
	flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if syscall.Statfs(p, &st) == nil {
		for _, f := range [][2]uintptr{{stNoSuid, syscall.MS_NOSUID}, {stNoDev, syscall.MS_NODEV}, {stNoExec, syscall.MS_NOEXEC}, {stNoAtime, syscall.MS_NOATIME}, {stRelAtime, syscall.MS_RELATIME}, {stNoDirAtime, syscall.MS_NODIRATIME}} {
			if uintptr(st.Flags)&f[0] != 0 {
				flags |= f[1]
			}
		}
	}
	return syscall.Mount("", p, "", flags, "")
}

// statfs flags (ST_*), as the kernel reports a mount's.
const (
	stNoSuid     = 0x2
	stNoDev      = 0x4
	stNoExec     = 0x8
	stNoAtime    = 0x400
	stNoDirAtime = 0x800
	stRelAtime   = 0x1000
)

// dropCapabilities gives up every capability of this thread, and of
// anything it starts (the bounding set goes too).
func dropCapabilities() error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	// No ambient ones.
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	return nil
}
