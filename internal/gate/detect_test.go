package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  map[string]string
		why   string
	}{
		{"go", map[string]string{"go.mod": "module x\n"},
			map[string]string{"typecheck": "go vet ./...", "test": "go test ./..."}, "go.mod: Go module (no go build gate: go vet type-checks every package"},
		{"node pnpm ts", map[string]string{"package.json": `{"scripts": {"test": "vitest run", "lint": "eslint .", "build": "tsc -b"}}`, "pnpm-lock.yaml": "", "tsconfig.json": "{}"},
			map[string]string{"test": "pnpm run test", "lint": "pnpm run lint", "typecheck": "pnpm exec tsc --noEmit", "build": "pnpm run build"}, "Node, pnpm (pnpm-lock.yaml)"},
		{"node npm default test script", map[string]string{"package.json": `{"scripts": {"test": "echo \"Error: no test specified\" && exit 1", "typecheck": "tsc --noEmit"}}`},
			map[string]string{"typecheck": "npm run typecheck"}, "npm (no lock file)"},
		{"node yarn", map[string]string{"package.json": `{"scripts": {"test": "jest"}}`, "yarn.lock": ""},
			map[string]string{"test": "yarn run test"}, "yarn (yarn.lock)"},
		{"python", map[string]string{"pyproject.toml": "[project]\nname='x'\n[tool.pytest.ini_options]\n[tool.ruff]\n[tool.mypy]\n"},
			map[string]string{"test": "pytest", "lint": "ruff check .", "typecheck": "mypy ."}, "pyproject.toml: Python"},
		{"rust", map[string]string{"Cargo.toml": "[package]\nname = \"x\"\n"},
			map[string]string{"typecheck": "cargo check", "lint": "cargo clippy -- -D warnings", "test": "cargo test"}, "Cargo.toml: Rust crate"},
		{"go and makefile", map[string]string{"go.mod": "module x\n", "Makefile": ".PHONY: test lint\nGO := go\ntest: deps\n\t$(GO) test ./...\nlint:\n\tgolangci-lint run\n"},
			map[string]string{"typecheck": "go vet ./...", "test": "make test", "lint": "make lint"}, "Makefile: its own targets"},
		{"makefile check only", map[string]string{"Makefile": "check:\n\t./run-all\n"},
			map[string]string{"test": "make check"}, "Makefile"},
		{"go and node", map[string]string{"go.mod": "module x\n", "package.json": `{"scripts": {"test": "jest"}}`, "package-lock.json": "{}"},
			map[string]string{"typecheck": "go vet ./...", "test": "go test ./... && npm test"}, "Node, npm (package-lock.json)"},
		// minimist: npm test runs the lint first (pretest).
		{"node lint in pretest", map[string]string{"package.json": `{"scripts": {"lint": "eslint --ext=js,mjs .", "pretest": "npm run lint", "test": "npm run tests-only"}}`},
			map[string]string{"test": "npm test"}, "lint: no gate of its own, npm test runs it (pretest)"},
		{"node lint in test", map[string]string{"package.json": `{"scripts": {"lint": "eslint .", "test": "eslint . && jest"}}`, "yarn.lock": ""},
			map[string]string{"test": "yarn run test"}, "yarn run test runs it (test)"},
		// colorama: the Makefile's test runs a maintainer's virtualenv.
		{"makefile test from a home folder", map[string]string{"tox.ini": "[tox]\nenvlist = py3\n[testenv]\ncommands = pytest\n",
			"Makefile": "NAME=colorama\nifeq ($(OS),Windows_NT)\n\tpython=~/.virtualenvs/colorama/Scripts/python.exe\nelse\n\tpython=~/.virtualenvs/colorama/bin/python\nendif\n\ntest: ## Run tests\n\t$(python) -m pytest -rs colorama/tests\n.PHONY: test\n\nlint:\n\tflake8 colorama\n"},
			map[string]string{"test": "tox", "lint": "make lint"}, "Makefile: test runs ~/.virtualenvs/colorama/Scripts/python.exe, a path on one machine → kept test: tox"},
		{"makefile test from $HOME, nothing else", map[string]string{"Makefile": "test:\n\t$(HOME)/bin/runtests\n"},
			map[string]string{}, "Makefile: test runs $(HOME)/bin/runtests, a path on one machine → no gate from it"},
		{"nothing", map[string]string{"README": "hi"}, map[string]string{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, s := range c.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f := Detect(dir)
			if len(f.Commands) != len(c.want) {
				t.Errorf("commands %v, want %v", f.Commands, c.want)
			}
			for k, v := range c.want {
				if f.Commands[k] != v {
					t.Errorf("%s = %q, want %q", k, f.Commands[k], v)
				}
			}
			if why := strings.Join(f.Why, "\n"); !strings.Contains(why, c.why) || (len(c.want) == 0) != f.Empty() {
				t.Errorf("why %q lacks %q (empty %v)", why, c.why, f.Empty())
			}
		})
	}
}
