package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestExecExitCodeAndOutput(t *testing.T) {
	var out bytes.Buffer
	res, err := Exec{}.Run(context.Background(), Cmd{Argv: []string{"sh", "-c", "echo hi; exit 3"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || strings.TrimSpace(out.String()) != "hi" {
		t.Fatalf("got exit %d out %q", res.ExitCode, out.String())
	}
}

func TestExecNotFound(t *testing.T) {
	_, err := Exec{}.Run(context.Background(), Cmd{Argv: []string{"no-such-binary-xyz"}})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
}

// The timeout must kill grandchildren too: an agent's backgrounded sleep
// that outlives the agent is the classic orphan.
func TestTimeoutKillsWholeGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, err := Exec{Grace: 200 * time.Millisecond}.Run(context.Background(), Cmd{
		Argv:    []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; wait"},
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatal("want TimedOut")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(2 * time.Second)
	for {
		if !Alive(pid) {
			return // gone (or a zombie nobody reaps)
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive after timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Exec{Grace: 100 * time.Millisecond}.Run(ctx, Cmd{Argv: []string{"sleep", "10"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline, got %v", err)
	}
}

func TestSplitArgs(t *testing.T) {
	t.Setenv("RALPH_TEST_DIR", "/opt/x y")
	t.Setenv("HOME", "/home/u")
	for in, want := range map[string][]string{
		`a b  c`:                           {"a", "b", "c"},
		`python3 "a b" 'c d'`:              {"python3", "a b", "c d"},
		`x\ y "q\"z"`:                      {"x y", `q"z`},
		`''`:                               {""},
		`grep -E "\d+" '$NOT_SET'`:         {"grep", "-E", `\d+`, "$NOT_SET"},
		`sh -c 'echo $! > f; wait'`:        {"sh", "-c", "echo $! > f; wait"},
		`"$RALPH_TEST_DIR/agent" -{a,b}`:   {"$RALPH_TEST_DIR/agent", "-a", "-b"},
		`sh -c "cat ${RALPH_PROMPT_FILE}"`: {"sh", "-c", "cat $RALPH_PROMPT_FILE"},
		`~/agent $HOME`:                    {"/home/u/agent", "/home/u"}, // ~ asks for HOME too
	} {
		got, err := SplitArgs(in)
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		`a 'b`:            "without closing quote",
		`agent > out.txt`: "`>` is not a valid word",
		`agent; rm x`:     "`;` is not a valid word",
		`agent $(date)`:   "command substitution",
	} {
		if _, err := SplitArgs(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SplitArgs(%q): error %v, want %q", in, err, want)
		}
	}
}

func TestEnviron(t *testing.T) {
	got := Environ([]string{"A=1", "B=2"}, "A=3", "C=4")
	if strings.Join(got, ",") != "A=3,B=2,C=4" {
		t.Fatal(got)
	}
}

func TestFakeRunner(t *testing.T) {
	f := NewFakeRunner(t, Expectation{Argv: []string{"git", "status"}, Stdout: "clean"})
	out, err := Output(context.Background(), f, Cmd{Argv: []string{"git", "status"}})
	if err != nil || out != "clean" {
		t.Fatal(out, err)
	}
}
