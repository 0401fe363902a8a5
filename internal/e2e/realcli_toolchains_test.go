package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// TestRealCLIToolchains: each real agent CLI, in the sandbox, from a
// fresh and empty HOME (no ~/.cache/go-build, no npm cache, no CLI
// state: a new laptop, a CI job), on a real project of each toolchain —
// a Go module, a Node package whose npm test runs nyc, a Python project
// tested by unittest and by Debian's pytest. The CLI's own tools write
// the honest fix and run the project's toolchain; the baseline, the
// gates and the story's check run theirs; the story passes, nothing says
// "read-only file system", and the user's HOME holds nothing a toolchain
// wrote.
func TestRealCLIToolchains(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.name, func(t *testing.T) {
			requireCLI(t, c.bin)
			for _, p := range toolchainProjects {
				t.Run(p.name, func(t *testing.T) { testToolchain(t, c, p) })
			}
		})
	}
}

// toolchainProject is a project, its gate and story check, the fix the
// agent writes and the toolchain command its shell runs.
type toolchainProject struct {
	name    string
	files   map[string]string
	setup   func(t *testing.T, dir string) // before the first commit
	fixPath string
	fix     string
	run     string // the agent's own toolchain run, in its shell
}

var toolchainProjects = []toolchainProject{
	{
		name: "go",
		files: map[string]string{
			"go.mod":        "module example.com/calc\n\ngo 1.22\n",
			"calc.go":       "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
			"calc_test.go":  "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n",
			"story_test.go": "//go:build story\n\npackage calc\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(3) != 6 {\n\t\tt.Fatal(\"Double\")\n\t}\n}\n",
			"prd.json":      toolchainPRD(`{"test": "go test ./..."}`, `"go test -tags story ./..."`),
		},
		fixPath: "double.go",
		fix:     "package calc\n\n// Double doubles.\nfunc Double(n int) int { return Add(n, n) }\n",
		run:     "go build ./... && go vet ./... && echo TOOLCHAIN-OK",
	},
	{
		name: "node",
		files: map[string]string{
			"package.json":  `{"name": "calc", "version": "1.0.0", "private": true, "scripts": {"test": "nyc --reporter=text node test.js"}, "devDependencies": {"nyc": "` + nycVersion + `"}}` + "\n",
			"index.js":      "exports.add = (a, b) => a + b;\n",
			"test.js":       "const assert = require('assert');\nassert.strictEqual(require('./index').add(2, 3), 5);\nconsole.log('add ok');\n",
			"story.test.js": "const assert = require('assert');\nassert.strictEqual(require('./index').double(3), 6);\nconsole.log('double ok');\n",
			".gitignore":    ".nyc_output/\ncoverage/\n",
			"prd.json":      toolchainPRD(`{"test": "npm test"}`, `"node story.test.js"`),
		},
		setup:   installNyc,
		fixPath: "index.js",
		fix:     "exports.add = (a, b) => a + b;\nexports.double = (n) => exports.add(n, n);\n",
		run:     "npm test && echo TOOLCHAIN-OK",
	},
	{
		name: "python",
		files: map[string]string{
			"calc.py":         "def add(a, b):\n    return a + b\n",
			"test_calc.py":    "import unittest\n\nimport calc\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n",
			"check_double.py": "import calc\n\n\ndef test_double():\n    assert calc.double(3) == 6\n",
			".gitignore":      "__pycache__/\n.pytest_cache/\n",
			"prd.json":        toolchainPRD(`{"test": "python3 -m unittest -q && /usr/bin/python3 -m pytest -q test_calc.py"}`, `"/usr/bin/python3 -m pytest -q check_double.py"`),
		},
		fixPath: "calc.py",
		fix:     "def add(a, b):\n    return a + b\n\n\ndef double(n):\n    return add(n, n)\n",
		run:     "python3 -m unittest -q && /usr/bin/python3 -m pytest -q && echo TOOLCHAIN-OK",
	},
}

func toolchainPRD(gates, check string) string {
	return `{"project": "calc", "branch_name": "ralph/calc", "quality_checks": ` + gates + `,
 "user_stories": [{"id": "US-001", "title": "Double", "description": "Add a double function next to add.",
  "acceptance_criteria": ["double(3) is 6"], "priority": 1, "checks": [` + check + `]}]}
`
}

// nycVersion is the nyc the Node project's npm test runs (from the npm
// registry, installed once per test process).
const nycVersion = "17.1.0"

var (
	nycOnce sync.Once
	nycDir  string
	nycErr  error
)

// installNyc puts nyc into the project (node_modules and the lock file,
// committed with it, as a vendored project has them: the baseline's and
// the gates' checkouts hold only what is committed).
func installNyc(t *testing.T, dir string) {
	t.Helper()
	nycOnce.Do(func() {
		nycDir, nycErr = os.MkdirTemp("", "ralph-e2e-nyc-")
		if nycErr != nil {
			return
		}
		os.WriteFile(filepath.Join(nycDir, "package.json"), []byte(`{"name": "nyc-fixture", "private": true}`), 0o644)
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "nyc@"+nycVersion)
		cmd.Dir = nycDir
		if out, err := cmd.CombinedOutput(); err != nil {
			nycErr = err
			nycDir = string(out)
		}
	})
	if nycErr != nil {
		t.Fatalf("npm install nyc@%s (the npm registry must be reachable): %v\n%s", nycVersion, nycErr, nycDir)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(nycDir, "node_modules"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying node_modules: %v\n%s", err, out)
	}
	lock := strings.ReplaceAll(mustRead(t, filepath.Join(nycDir, "package-lock.json")), `"nyc-fixture"`, `"calc"`)
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freshHome is the environment of a user with an empty HOME and no
// toolchain settings: no Go cache, module cache or GOPATH of their own.
func freshHome(t *testing.T) (string, []string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// The XDG folders as they are when unset (an empty value is not the
	// same to every tool: bun makes a relative "bun" folder of it).
	return home, []string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"GOCACHE=", "GOMODCACHE=", "GOPATH=", "GOFLAGS=", "PYTHONDONTWRITEBYTECODE="}
}

func testToolchain(t *testing.T, c cliCase, p toolchainProject) {
	home, env := freshHome(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	for name, content := range p.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p.setup != nil {
		p.setup(t, dir)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "initial")
	srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
		{ToolCalls: []llmtest.ToolCall{writeFix(c, dir, p.fixPath, p.files[p.fixPath], p.fix)}},
		{ToolCalls: []llmtest.ToolCall{c.shell(p.run)}},
		{Text: "Added double, and the project's own tests pass.\n\n<promise>COMPLETE</promise>"},
	}})
	res := ralphWithin(t, 12*time.Minute, dir, env, runArgs(c, srv, "--max-attempts", "1", "--iteration-timeout", "8m")...)
	tr := transcripts(t, dir, "US-001")
	baseline, _ := os.ReadFile(filepath.Join(dir, ".ralph", "baseline.log"))
	t.Logf("%s on %s from an empty HOME: %s", c.name, p.name, res.duration.Round(time.Millisecond))
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n--- baseline\n%s\n--- transcript\n%s", res, tail(string(baseline), 4000), tail(tr, 8000))
	}
	if st := loadState(t, dir); st.Items["US-001"] == nil || st.Items["US-001"].Status != engine.ItemPassed {
		t.Fatalf("US-001 did not pass\n%s", res)
	}
	var results strings.Builder
	for _, r := range srv.Requests() {
		results.Write(r.Body)
	}
	if !strings.Contains(results.String(), "TOOLCHAIN-OK") {
		t.Errorf("the agent's own %s run did not succeed in its sandbox\n%s", p.name, tail(tr, 8000))
	}
	for what, text := range map[string]string{"transcript": tr, "baseline": string(baseline), "agent's tool results": results.String()} {
		if strings.Contains(strings.ToLower(text), "read-only file system") {
			t.Errorf("the %s says \"read-only file system\":\n%s", what, tail(text, 6000))
		}
	}
	// The honest run changed none of the CLI's settings (what it writes
	// itself, its state, is not taken for tampering).
	if strings.Contains(tr, "tamper_detected") {
		t.Errorf("an honest run was reported as changing the CLI's settings:\n%s", tail(tr, 4000))
	}
	// What the toolchains wrote is in the sandbox's private homes, not
	// in the user's.
	entries, _ := os.ReadDir(home)
	for _, e := range entries {
		switch name := e.Name(); {
		case name == ".cache":
			for _, sub := range []string{"go-build", "pip"} {
				if _, err := os.Stat(filepath.Join(home, name, sub)); err == nil {
					t.Errorf("~/.cache/%s was written in the user's home", sub)
				}
			}
		case name == "go" || name == ".npm" || strings.HasPrefix(name, ".node-spawn-wrap"):
			t.Errorf("~/%s was written in the user's home", name)
		}
	}
}

// writeFix is the CLI's own file tool call that writes content at path:
// its writing tool, or Copilot's edit tool over a file that exists (its
// create tool refuses a path that exists).
func writeFix(c cliCase, dir, path, old, content string) llmtest.ToolCall {
	if c.name == "copilot" && old != "" {
		return tc("edit", map[string]any{"path": filepath.Join(dir, path), "old_str": old, "new_str": content})
	}
	return c.write(dir, path, content)
}
