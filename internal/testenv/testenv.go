// Package testenv gives a test binary's child processes (the real agent
// CLIs above all) a temp dir and XDG dirs of their own, removed when the
// tests end, and fails the tests if a CLI still wrote into the machine's
// temp dir: gemini leaves gemini-client-error-*.json there and opencode an
// opencode/ folder, which piled up on developers' machines after each
// `make check`.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/sandbox"
)

// xdgDirs are the base directories the CLIs fall back to for caches,
// config, data and state.
var xdgDirs = []string{"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"}

// Main runs the tests with TMPDIR and the XDG dirs inside a fresh folder
// and returns the exit code for os.Exit. Call it from TestMain.
func Main(m *testing.M) int {
	// A test binary that runs ralph in process is also the init of the
	// sandboxes it starts.
	sandbox.RunInitIfAsked(os.Args)
	sys := os.TempDir()
	root, err := os.MkdirTemp(sys, "ralph-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer os.RemoveAll(root)
	// The go command's own cache defaults to $XDG_CACHE_HOME/go-build:
	// keep it where it is, or tests that build would start cold.
	if os.Getenv("GOCACHE") == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(dir, "go-build"))
		}
	}
	// The installed agent CLIs (scripts/install-agents.sh) are looked
	// up in the cache folder: keep them found once it is isolated.
	// (agent.AgentsDir's default; agent's own tests import testenv.)
	if dir, err := os.UserCacheDir(); err == nil && os.Getenv("RALPH_AGENTS_DIR") == "" {
		os.Setenv("RALPH_AGENTS_DIR", filepath.Join(dir, "ralph", "agents"))
	}
	if err := Isolate(root, os.Setenv); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	start := time.Now().Add(-time.Second) // file times may be coarse
	code := m.Run()
	if left := leftovers(sys, start); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: agent CLIs wrote into the system temp dir %s during the tests: %s\n", sys, strings.Join(left, ", "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Isolate makes root/tmp and root/xdg/* and sets TMPDIR and the XDG
// variables to them with set (os.Setenv, or a testscript Env's Setenv).
func Isolate(root string, set func(key, value string) error) error {
	dirs := map[string]string{"TMPDIR": filepath.Join(root, "tmp")}
	for _, k := range xdgDirs {
		dirs[k] = filepath.Join(root, "xdg", strings.ToLower(strings.TrimPrefix(strings.TrimSuffix(k, "_HOME"), "XDG_")))
	}
	for k, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := set(k, dir); err != nil {
			return err
		}
	}
	return nil
}

// offenders are the names the agent CLIs give what they write into the
// temp dir when they are not given their own.
var offenders = []string{"gemini-", "opencode", "codex", "claude-"}

// leftovers lists what the agent CLIs created or changed in dir since
// start.
func leftovers(dir string, since time.Time) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var left []string
	for _, e := range entries {
		name := e.Name()
		match := false
		for _, p := range offenders {
			match = match || strings.HasPrefix(name, p)
		}
		if !match {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().After(since) {
			left = append(left, name)
		}
	}
	sort.Strings(left)
	return left
}
