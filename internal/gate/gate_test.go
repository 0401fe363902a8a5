package gate

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

func TestRunStopsAtFirstFailureAndKeepsTail(t *testing.T) {
	var log bytes.Buffer
	r := Runner{Proc: proc.Exec{}}
	results, ok := r.Run(context.Background(), t.TempDir(), []Gate{
		{Name: "typecheck", Command: "true"},
		{Name: "test", Command: "echo first; seq 1 5000; echo 'FAIL: TestX' >&2; exit 1"},
		{Name: "build", Command: "echo never"},
	}, &log)
	if ok || len(results) != 2 || !results[0].Passed || results[1].Passed || results[1].ExitCode != 1 {
		t.Fatalf("%+v", results)
	}
	if strings.Contains(log.String(), "never") {
		t.Fatal("a gate after a failure ran")
	}
	ctxText := FailureContext(results, 400)
	if !strings.Contains(ctxText, "Gate `test`") || !strings.Contains(ctxText, "FAIL: TestX") || len(ctxText) > 600 {
		t.Fatalf("failure context: %s", ctxText)
	}
	if Summary(results) != "typecheck passed, test FAILED" {
		t.Fatal(Summary(results))
	}
}

func TestGateTimeoutIsAFailure(t *testing.T) {
	r := Runner{Proc: proc.Exec{Grace: 100 * time.Millisecond}, Timeout: 200 * time.Millisecond}
	results, ok := r.Run(context.Background(), t.TempDir(), []Gate{{Name: "slow", Command: "sleep 5"}}, nil)
	if ok || !results[0].TimedOut || !strings.Contains(results[0].Output, "timed out") {
		t.Fatalf("%+v", results)
	}
}

func TestTrimKeepsHeadAndTail(t *testing.T) {
	s := "HEAD" + strings.Repeat("x", 10000) + "TAIL"
	out := Trim(s, 200)
	if len(out) > 220 || !strings.HasPrefix(out, "HEAD") || !strings.HasSuffix(out, "TAIL") || !strings.Contains(out, "bytes trimmed") {
		t.Fatalf("%q", out)
	}
}

func TestArgvStartsPlainCommandsWithoutAShell(t *testing.T) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for cmd, direct := range map[string]bool{
		"true":                    true,
		"ls -la --color=never ./": true,
		"make check":              true,
		"make test && make lint":  false,
		"echo hi":                 false,
		"FOO=1 make":              false,
		"./check.sh":              false,
		"make $TARGET":            false,
		"grep -q 'x' f":           false,
		"no-such-program-ralph":   false,
		"cat *.txt":               false,
	} {
		argv := argv(cmd, env)
		if got := argv[0] != "sh"; got != direct {
			t.Errorf("Argv(%q) = %q, want direct=%v", cmd, argv, direct)
		}
		if argv[0] == "sh" && (len(argv) != 3 || argv[2] != cmd) {
			t.Errorf("Argv(%q) = %q", cmd, argv)
		}
	}
	if argv := argv("true", []string{"PATH=bin:/usr/bin:/bin"}); argv[0] != "sh" {
		t.Errorf("a relative PATH entry: %q", argv)
	}
	// Started directly, a gate still passes, fails and reports its exit code.
	r := Runner{Proc: proc.Exec{}}
	results, ok := r.Run(context.Background(), t.TempDir(), []Gate{{Name: "t", Command: "true"}, {Name: "f", Command: "false"}}, nil)
	if ok || !results[0].Passed || results[1].Passed || results[1].ExitCode != 1 {
		t.Fatalf("%+v", results)
	}
}
