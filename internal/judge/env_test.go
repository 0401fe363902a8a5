package judge

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// openEnv is the judge's dependency folders of a repository whose ignored
// node_modules holds a package, and a checkout folder given them once.
func openEnv(t *testing.T) (*Env, string) {
	t.Helper()
	j, dir := newJudge(t)
	write(t, dir, map[string]string{".gitignore": "node_modules/\n", "a.txt": "a\n",
		"node_modules/pkg/index.js": "module.exports = 1;\n", "node_modules/pkg/lib/util.js": "exports.x = 2;\n"})
	run(t, j, "add", ".gitignore", "a.txt")
	run(t, j, "commit", "-qm", "init")
	env, err := OpenEnv(context.Background(), j.Repo, dir, filepath.Join(dir, ".ralph", "judge", "env"), "run-1")
	if err != nil || env == nil {
		t.Fatalf("OpenEnv: %v, %v", env, err)
	}
	t.Cleanup(env.Close)
	checkout := filepath.Join(dir, ".ralph", "judge", "trees", "0")
	if err := os.MkdirAll(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := env.Give(context.Background(), checkout); err != nil {
		t.Fatal(err)
	}
	return env, checkout
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A copy nothing touched is given again as it is: neither copied nor (where
// the folder is watched) walked.
func TestEnvGivesAnUntouchedCopyAsItIs(t *testing.T) {
	env, checkout := openEnv(t)
	file := filepath.Join(checkout, "node_modules", "pkg", "index.js")
	before := inode(t, file)
	// Reading is not touching.
	readFile(t, file)
	for i := 0; i < 3; i++ {
		if err := env.Give(context.Background(), checkout); err != nil {
			t.Fatal(err)
		}
	}
	if inode(t, file) != before {
		t.Error("an untouched copy was copied again")
	}
	if runtime.GOOS == "linux" {
		if s := env.seen.state(filepath.Join(checkout, "node_modules")); s != untouched {
			t.Errorf("watch state %d, want untouched", s)
		}
	}
}

// Whatever a gate did to its copy, the next judging gets the base's.
func TestEnvGivesAFreshCopyAfterAGateWroteIt(t *testing.T) {
	for name, touch := range map[string]func(t *testing.T, nm string){
		"a file rewritten": func(t *testing.T, nm string) {
			write(t, nm, map[string]string{"pkg/index.js": "module.exports = 666666;\n"})
		},
		"a file added deep down": func(t *testing.T, nm string) {
			write(t, nm, map[string]string{"pkg/lib/deep/new.js": "x\n"})
		},
		"a file removed": func(t *testing.T, nm string) {
			if err := os.Remove(filepath.Join(nm, "pkg", "lib", "util.js")); err != nil {
				t.Fatal(err)
			}
		},
		"a mode changed": func(t *testing.T, nm string) {
			if err := os.Chmod(filepath.Join(nm, "pkg", "index.js"), 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"the folder replaced": func(t *testing.T, nm string) {
			if err := os.RemoveAll(nm); err != nil {
				t.Fatal(err)
			}
			write(t, nm, map[string]string{"pkg/index.js": "module.exports = 9;\n"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			env, checkout := openEnv(t)
			nm := filepath.Join(checkout, "node_modules")
			touch(t, nm)
			if err := env.Give(context.Background(), checkout); err != nil {
				t.Fatal(err)
			}
			assertBaseCopy(t, nm)
		})
	}
}

// A write that puts the file's size and modification time back, which a
// walk of the folder cannot tell, is seen by the watch.
func TestEnvSeesAWriteThatPutItsTimeBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the folders given are watched on Linux")
	}
	env, checkout := openEnv(t)
	nm := filepath.Join(checkout, "node_modules")
	file := filepath.Join(nm, "pkg", "index.js")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	write(t, nm, map[string]string{"pkg/index.js": "module.exports = 2;\n"}) // the same size
	if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := env.Give(context.Background(), checkout); err != nil {
		t.Fatal(err)
	}
	assertBaseCopy(t, nm)
}

// Without a watch (none on this system, or over the user's limit) each
// giving walks the copy, as before there was one.
func TestEnvWalksTheCopyWithoutAWatch(t *testing.T) {
	env, checkout := openEnv(t)
	env.seen.close()
	nm := filepath.Join(checkout, "node_modules")
	file := filepath.Join(nm, "pkg", "index.js")
	before := inode(t, file)
	if err := env.Give(context.Background(), checkout); err != nil {
		t.Fatal(err)
	}
	if inode(t, file) != before {
		t.Error("an untouched copy was copied again")
	}
	write(t, nm, map[string]string{"pkg/index.js": "module.exports = 12345;\n"})
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	if err := env.Give(context.Background(), checkout); err != nil {
		t.Fatal(err)
	}
	assertBaseCopy(t, nm)
}

// assertBaseCopy: the folder holds exactly what the base had.
func assertBaseCopy(t *testing.T, nm string) {
	t.Helper()
	if got := readFile(t, filepath.Join(nm, "pkg", "index.js")); got != "module.exports = 1;\n" {
		t.Errorf("index.js is %q, not the base's", got)
	}
	if got := readFile(t, filepath.Join(nm, "pkg", "lib", "util.js")); got != "exports.x = 2;\n" {
		t.Errorf("util.js is %q, not the base's", got)
	}
	if _, err := os.Stat(filepath.Join(nm, "pkg", "lib", "deep")); !os.IsNotExist(err) {
		t.Errorf("a folder the base lacks is there: %v", err)
	}
	fi, err := os.Stat(filepath.Join(nm, "pkg", "index.js"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("index.js mode %v, %v", fi.Mode(), err)
	}
}
