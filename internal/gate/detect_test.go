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
			map[string]string{"typecheck": "go vet ./...", "test": "go test ./...", "build": "go build ./..."}, "go.mod: Go module"},
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
			map[string]string{"typecheck": "go vet ./...", "test": "make test", "lint": "make lint", "build": "go build ./..."}, "Makefile: its own targets"},
		{"makefile check only", map[string]string{"Makefile": "check:\n\t./run-all\n"},
			map[string]string{"test": "make check"}, "Makefile"},
		{"go and node", map[string]string{"go.mod": "module x\n", "package.json": `{"scripts": {"test": "jest"}}`, "package-lock.json": "{}"},
			map[string]string{"typecheck": "go vet ./...", "test": "go test ./... && npm test", "build": "go build ./..."}, "Node, npm (package-lock.json)"},
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
			if why := strings.Join(f.Why, "\n"); !strings.Contains(why, c.why) || (c.why == "") != f.Empty() {
				t.Errorf("why %q lacks %q (empty %v)", why, c.why, f.Empty())
			}
		})
	}
}
