package judge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What npm installed is held against package-lock.json: another version,
// other bytes or a package the lock lacks stop the run with `npm ci` as
// the fix; a package the lock has and node_modules lacks, no hidden
// lockfile or no lock at all pass.
func TestCheckNodeLock(t *testing.T) {
	lock := `{"lockfileVersion": 3, "packages": {"": {"name": "p"},
  "node_modules/a": {"version": "1.0.0", "integrity": "sha512-aaa"},
  "node_modules/b": {"version": "2.0.0", "integrity": "sha512-bbb"},
  "node_modules/opt": {"version": "1.0.0", "optional": true}}}`
	cases := []struct {
		name, installed, want string
	}{
		{"as locked", `{"packages": {"node_modules/a": {"version": "1.0.0", "integrity": "sha512-aaa"}, "node_modules/b": {"version": "2.0.0", "integrity": "sha512-bbb"}}}`, ""},
		{"another version", `{"packages": {"node_modules/a": {"version": "1.0.1", "integrity": "sha512-aaa"}}}`, "a 1.0.1 (package-lock.json: 1.0.0)"},
		{"other bytes", `{"packages": {"node_modules/b": {"version": "2.0.0", "integrity": "sha512-evil"}}}`, "b 2.0.0 (other bytes than package-lock.json's integrity)"},
		{"not in the lock", `{"packages": {"node_modules/evil": {"version": "6.6.6"}}}`, "evil 6.6.6 (not in package-lock.json)"},
		{"not hers", `not json`, "node_modules/.package-lock.json is not npm's"},
		{"no hidden lockfile", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, dir := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "package-lock.json"), []byte(lock), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.installed != "" {
				if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "node_modules", ".package-lock.json"), []byte(c.installed), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := checkNodeLock(root, dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want %q", err, c.want)
			case c.want != "" && c.name != "not hers" && !strings.Contains(err.Error(), "run `npm ci`"):
				t.Fatalf("no fix named: %v", err)
			}
		})
	}
	// No package-lock.json: nothing to compare.
	if err := checkNodeLock(t.TempDir(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
