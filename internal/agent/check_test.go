package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A CLI whose --version is slow (a loaded machine, a CLI checking for
// updates) is installed: the preflight says its version is unknown and
// does not refuse the run with advice to reinstall. One whose --version
// fails is still refused, with that advice.
func TestCheckSlowVersionIsNotMissing(t *testing.T) {
	defer SetVersionTimeout(300 * time.Millisecond)()
	dir := t.TempDir()
	slow := filepath.Join(dir, "gemini")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 5\necho 0.1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := New("gemini", Options{Command: []string{slow}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	found, err := a.(Checker).Check(context.Background(), "")
	if err != nil {
		t.Fatalf("a slow --version refused the run: %v", err)
	}
	if !strings.Contains(found, "did not answer within 300ms") || !strings.Contains(found, slow) {
		t.Errorf("found %q", found)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the check waited %s for a --version bounded at 300ms", d)
	}

	broken := filepath.Join(dir, "broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'Error: cannot find module' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, _ = New("gemini", Options{Command: []string{broken}})
	if _, err := a.(Checker).Check(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "reinstall it with npm install -g @google/gemini-cli") ||
		!strings.Contains(err.Error(), "cannot find module") {
		t.Errorf("a failing --version: %v", err)
	}
}
