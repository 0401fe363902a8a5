// Command testprogress runs `go test -json …` for make check and prints
// what plain go test prints (a line per package, the output of what
// failed), plus a line whenever nothing was printed for -every: how long
// the tests have run, how many packages reported, and what the go command
// is doing now (which packages it compiles, which test binaries run).
//
// go test reports packages in the order they were named, so one slow
// package early in the list (or a long race-instrumented compile) would
// otherwise keep the terminal silent for many minutes.
//
//	go run ./scripts/testprogress [-every 1m] go test -json -count=1 ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	every := flag.Duration("every", time.Minute, "print what is running when nothing was printed for this long")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: testprogress [-every D] go test -json ARGS…\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), *every, os.Stdout))
}

// run starts argv, copies its report to out as go test would print it,
// and returns its exit code.
func run(argv []string, every time.Duration, out io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testprogress: %v\n", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testprogress: %v\n", err)
		return 1
	}
	// ^C reaches the go command (same process group); wait for it.
	signal.Ignore(os.Interrupt)
	r := &report{out: out, start: time.Now(), last: time.Now(), tests: map[string]*pkgTests{}}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.heartbeat(every, activity(cmd.Process.Pid))
			}
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	err = cmd.Wait()
	close(done)
	r.summary()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "testprogress: %v\n", err)
	return 1
}

// event is one line of go test -json (test2json's TestEvent, with the
// go command's build events).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// pkgTests is what a package printed so far: its own lines and each
// test's, kept until the package's result says whether to show them.
type pkgTests struct {
	own    []string
	byTest map[string][]string
	failed []string // tests that failed, in order
}

// report prints go test's report as events arrive.
type report struct {
	mu       sync.Mutex
	out      io.Writer
	start    time.Time
	last     time.Time // when a line was last printed
	reported int
	failed   []string
	tests    map[string]*pkgTests
}

func (r *report) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format, args...)
	r.last = time.Now()
}

func (r *report) line(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ev event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &ev) != nil {
		r.printf("%s\n", b) // not an event: as it came
		return
	}
	switch ev.Action {
	case "build-output":
		r.printf("%s", ev.Output)
		return
	case "build-fail":
		return
	}
	p := r.tests[ev.Package]
	if p == nil {
		p = &pkgTests{byTest: map[string][]string{}}
		r.tests[ev.Package] = p
	}
	switch {
	case ev.Action == "output" && ev.Test == "":
		p.own = append(p.own, ev.Output)
	case ev.Action == "output":
		p.byTest[ev.Test] = append(p.byTest[ev.Test], ev.Output)
	case ev.Action == "fail" && ev.Test != "":
		p.failed = append(p.failed, ev.Test)
	case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
		r.result(ev, p)
	}
}

// result prints a package's line, and on failure what its failed tests
// and the package itself printed.
func (r *report) result(ev event, p *pkgTests) {
	delete(r.tests, ev.Package)
	r.reported++
	if ev.Action == "fail" {
		r.failed = append(r.failed, ev.Package)
		for _, t := range p.failed {
			for _, l := range p.byTest[t] {
				if !strings.HasPrefix(l, "=== ") {
					r.printf("%s", l)
				}
			}
		}
		said := false
		for _, l := range p.own {
			if !strings.HasPrefix(l, "=== ") && strings.TrimSpace(l) != "PASS" {
				r.printf("%s", l)
				said = said || strings.HasPrefix(l, "FAIL\t")
			}
		}
		if !said { // a package that did not build prints no line of its own
			r.printf("FAIL\t%s\t%.3fs\n", ev.Package, ev.Elapsed)
		}
		return
	}
	// The package's last line says it: "ok  pkg 1.2s", "? pkg [no test
	// files]", with "(cached)" or "[no tests to run]" where go test says so.
	for _, l := range slices.Backward(p.own) {
		if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") {
			r.printf("%s", l)
			return
		}
	}
	r.printf("ok  \t%s\t%.3fs\n", ev.Package, ev.Elapsed)
}

// heartbeat prints a line when nothing was printed for every.
func (r *report) heartbeat(every time.Duration, now []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.last) < every {
		return
	}
	s := fmt.Sprintf("testprogress: %s, %d package(s) reported", time.Since(r.start).Round(time.Second), r.reported)
	if len(now) > 0 {
		s += "; now " + strings.Join(now, "; ")
	}
	r.printf("%s\n", s)
}

func (r *report) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf("testprogress: %d package(s) in %s", r.reported, time.Since(r.start).Round(time.Second))
	if len(r.failed) > 0 {
		sort.Strings(r.failed)
		s += fmt.Sprintf(", %d failed: %s", len(r.failed), strings.Join(r.failed, " "))
	}
	r.printf("%s\n", s)
}

// activity names what the processes under pid are doing: the packages
// being compiled, the test binaries running (by their package folder),
// links and vet runs. Empty where /proc cannot be read.
func activity(pid int) []string {
	var compiling, running []string
	links, vets := 0, 0
	cwd, _ := os.Getwd()
	for _, p := range descendants(pid) {
		argv := cmdline(p)
		if len(argv) == 0 {
			continue
		}
		name := filepath.Base(argv[0])
		switch {
		case name == "compile":
			if pkg := flagValue(argv, "-p"); pkg != "" {
				compiling = append(compiling, pkg)
			}
		case name == "link":
			links++
		case name == "vet":
			vets++
		case strings.HasSuffix(name, ".test"):
			dir, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "cwd"))
			if err != nil {
				continue
			}
			if rel, err := filepath.Rel(cwd, dir); err == nil && !strings.HasPrefix(rel, "..") {
				dir = "./" + rel
			}
			if !slices.Contains(running, dir) {
				running = append(running, dir)
			}
		}
	}
	var out []string
	sort.Strings(compiling)
	sort.Strings(running)
	if len(compiling) > 0 {
		out = append(out, "compiling "+strings.Join(compiling, ", "))
	}
	if links > 0 {
		out = append(out, fmt.Sprintf("linking %d test binar%s", links, map[bool]string{true: "y", false: "ies"}[links == 1]))
	}
	if vets > 0 {
		out = append(out, fmt.Sprintf("vetting %d package(s)", vets))
	}
	if len(running) > 0 {
		out = append(out, "testing "+strings.Join(running, ", "))
	}
	return out
}

// descendants are the pids of every process under pid.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func flagValue(argv []string, name string) string {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}
