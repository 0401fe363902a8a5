package judge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Protected: test files and test-harness configuration by name and by
// folder, and the configured globs; code and docs are not.
func TestProtected(t *testing.T) {
	extra := []string{"*.snap", "fixtures/", "e2e/**/*.ts", "/config/ci.yml"}
	for p, want := range map[string]bool{
		"pkg/add_test.go":              true,
		"test_add.py":                  true,
		"pkg/add_test.py":              true,
		"src/add.test.ts":              true,
		"src/add.spec.js":              true,
		"spec/add_spec.rb":             true,
		"lib/add_test.rb":              true,
		"src/main/AddTest.java":        true,
		"src/main/AddTests.java":       true,
		"app/AddTest.kt":               true,
		"conftest.py":                  true,
		"sub/pytest.ini":               true,
		".mocharc.yml":                 true,
		"jest.config.ts":               true,
		"web/vitest.config.mjs":        true,
		"playwright.config.js":         true,
		"tests/helpers.go":             true,
		"pkg/testdata/golden.json":     true,
		"web/__tests__/x.js":           true,
		"spec/support/helper.rb":       true,
		"ui/__snapshots__/a.snap":      true,
		"db/fixtures/users.json":       true,
		"e2e/login/flow.ts":            true,
		"e2e/flow.ts":                  true,
		"config/ci.yml":                true,
		"pkg/add.go":                   false,
		"add.py":                       false,
		"src/test.ts":                  false,
		"latest/x.go":                  false,
		"testing/x.go":                 false,
		"README.md":                    false,
		"package.json":                 false, // protected in its test scripts only
		"pyproject.toml":               false,
		"src/e2e/flow.ts":              false,
		"other/config/ci.yml":          false,
		"fixturesx/users.json":         false,
		"e2e/flow.js":                  false,
		"jest.setup.js":                false,
		"docs/contest.py":              false,
		"pkg/contract_test.go.orig":    false,
		"pkg/attest.go":                false,
		"cmd/tool/main_test_helper.go": false,
	} {
		if got := Protected(p, extra); got != want {
			t.Errorf("Protected(%q) = %v, want %v", p, got, want)
		}
	}
}

// Match: a glob without a slash names a file anywhere, one ending in a
// slash a folder anywhere (or, with a slash inside, from the root), any
// other is matched from the root, "*" within a name, "**" across folders.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		{"*.snap", "a.snap", true},
		{"*.snap", "deep/in/a.snap", true},
		{"*.snap", "a.snap.bak", false},
		{"golden*", "x/golden-1.txt", true},
		{"fixtures/", "fixtures/a.json", true},
		{"fixtures/", "db/fixtures/deep/a.json", true},
		{"fixtures/", "fixtures", false}, // a file named so is no folder
		{"fix*/", "db/fixtures/a.json", true},
		{"src/gen/", "src/gen/a/b.go", true},
		{"src/gen/", "x/src/gen/a.go", false},
		{"/docs/*.md", "docs/a.md", true},
		{"docs/*.md", "docs/x/a.md", false},
		{"e2e/**/*.ts", "e2e/a/b/c.ts", true},
		{"e2e/**/*.ts", "e2e/c.ts", true},
		{"e2e/**/*.ts", "src/e2e/c.ts", false},
		{"e2e/**", "e2e/a/b", true},
		{"e2e/**", "e2e", true},
		{"**/gen/*.go", "a/b/gen/x.go", true},
		{"**/gen/*.go", "gen/x.go", true},
		{"**/gen/*.go", "a/gen/sub/x.go", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/b/c", false},
		{"a/b", "a/b/c", false},
	} {
		if got := Match(c.glob, c.path); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
}

const goTestFile = `package add

import "testing"

// TestAdd checks Add.
func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("2+3")
	}
}

type fixture struct{ a, b int }

var cases = []fixture{{1, 2}}

const limit, floor = 10, 0

func (f fixture) sum() int { return f.a + f.b }
`

// declarations maps each top-level declaration to its text: functions,
// methods by receiver, types, each name of a var or const; imports are
// left out (they grow with new tests).
func TestDeclarations(t *testing.T) {
	d, ok := declarations([]byte(goTestFile))
	if !ok {
		t.Fatal("not parsed")
	}
	want := map[string]string{
		"package":            "add",
		"func TestAdd":       "func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}",
		"type fixture":       "fixture struct{ a, b int }",
		"var cases":          "cases = []fixture{{1, 2}}",
		"const limit":        "limit, floor = 10, 0",
		"const floor":        "limit, floor = 10, 0",
		"method fixture.sum": "func (f fixture) sum() int { return f.a + f.b }",
	}
	if len(d) != len(want) {
		t.Errorf("declarations %q", d)
	}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("%s = %q, want %q", k, d[k], v)
		}
	}
	if _, ok := declarations([]byte("package add\nfunc {")); ok {
		t.Fatal("a file that does not parse has declarations")
	}
}

// keepsDeclarations: a Go test file may gain declarations (and imports)
// while every one it had stays byte for byte; a line added inside an
// existing test, a test removed, or a file that no longer parses is an
// edit.
func TestKeepsDeclarations(t *testing.T) {
	j, dir := newJudge(t)
	ctx := context.Background()
	blob := func(text string) string {
		t.Helper()
		p := filepath.Join(dir, "blob.go")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		id, err := j.Repo.Run(ctx, "hash-object", "-w", p)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	base := blob(goTestFile)
	added := strings.Replace(goTestFile, `import "testing"`, "import (\n\t\"strings\"\n\t\"testing\"\n)", 1) +
		"\nfunc TestAddMore(t *testing.T) { _ = strings.TrimSpace(\"\") }\n"
	early := strings.Replace(goTestFile, "\tif Add(2, 3)", "\treturn\n\tif Add(2, 3)", 1)
	removed := strings.Replace(goTestFile, "func (f fixture) sum() int { return f.a + f.b }\n", "", 1)
	for name, c := range map[string]struct {
		text string
		want bool
	}{
		"a test added":            {added, true},
		"the same file":           {goTestFile, true},
		"an early return":         {early, false},
		"a declaration removed":   {removed, false},
		"a comment moved in":      {strings.Replace(goTestFile, "\t\tt.Fatal", "\t\t// no\n\t\tt.Fatal", 1), false},
		"no longer parses":        {goTestFile + "\nfunc {", false},
		"a constant's value":      {strings.Replace(goTestFile, "10, 0", "10, 1", 1), false},
		"a var of the same name":  {strings.Replace(goTestFile, "{{1, 2}}", "{{2, 2}}", 1), false},
		"only the imports change": {strings.Replace(goTestFile, `import "testing"`, "import (\n\t\"testing\"\n)", 1), true},
	} {
		if got := j.keepsDeclarations(ctx, base, blob(c.text)); got != c.want {
			t.Errorf("%s: keepsDeclarations = %v, want %v", name, got, c.want)
		}
	}
	if j.keepsDeclarations(ctx, base, "0123456789012345678901234567890123456789") {
		t.Error("a blob that does not exist keeps the declarations")
	}
}
