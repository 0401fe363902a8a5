package gate

import (
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want string
	}{
		{"bash check.sh", "check.sh"},
		{"./scripts/lint.sh --strict && FOO=1 ./scripts/test", "scripts/lint.sh scripts/test"},
		{"make test", "GNUmakefile Makefile makefile"},
		{"npm run test -- --ci", "package.json"},
		{"python3 -m pytest tests/ -q", "conftest.py pytest.ini setup.cfg tox.ini"},
		{"python3 tests/run.py", "tests/run.py"},
		{"sh -c 'bash ci/check.sh; exit $?'", "ci/check.sh"},
		{"npx tsc --noEmit", "package.json tsconfig.json"},
		{"node_modules/.bin/eslint src/*.js", ".eslintrc .eslintrc.cjs .eslintrc.js .eslintrc.json .eslintrc.yaml .eslintrc.yml eslint.config.cjs eslint.config.js eslint.config.mjs node_modules/.bin/eslint"},
		// What a gate only reads is the work it checks, never protected.
		{"grep -qx 42 answer.txt", ""},
		{"! grep -q '<<<<<<<' shared.txt", ""},
		{"go test ./...", ""},
		{"test -f one.txt && cat one.txt | wc -l", ""},
		{"bash /usr/local/bin/check ../outside.sh", ""},
	} {
		if got := strings.Join(Files([]string{tc.cmd}), " "); got != tc.want {
			t.Errorf("Files(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func TestPrograms(t *testing.T) {
	got := Programs([]string{"go vet ./... && go test ./...", "CGO_ENABLED=0 ./scripts/check.sh; cd web && npm test", "test -f x || echo no", "make lint | tee out"})
	want := []string{"go", "./scripts/check.sh", "npm", "make", "tee"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Programs = %q, want %q", got, want)
	}
}
