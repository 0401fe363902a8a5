package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

const testPRD = `{
  "project": "p",
  "branch_name": "ralph/p",
  "user_stories": [
    {"id": "S-1", "title": "one", "priority": 1, "critical": true, "checks": ["test -e a"]},
    {"id": "S-2", "title": "two", "priority": 2, "allow_test_changes": true}
  ],
  "quality_checks": {"test": "go test ./..."}
}
`

const testConfig = "gates:\n  test: go test ./...\ncouncil: 3\n"
const testRoles = "triggers:\n  - condition: task_marked_ready_to_complete\n    role: reviewer\n"

// repo makes a repository folder with the three policy files and a run
// whose policy is pinned (a new run).
func repo(t *testing.T) (engine.Paths, *Guard) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root := t.TempDir()
	p := engine.PathsFor(root)
	for name, text := range map[string]string{"prd.json": testPRD, ".ralph/config.yaml": testConfig, ".ralph/roles.yaml": testRoles} {
		write(t, filepath.Join(root, name), text)
	}
	g := &Guard{paths: p, PRD: filepath.Join(root, "prd.json")}
	if _, err := g.Open("run-1", false); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteJSON(p.State, &engine.State{Version: 1, RunID: "run-1", Source: "prd", Status: engine.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	return p, g
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An agent's edits of every policy part are found, named field by field,
// put back (a PRD's other fields kept) and kept aside.
func TestRestoreNamesAndRestoresEveryPart(t *testing.T) {
	p, g := repo(t)
	prdFile := filepath.Join(p.Root, "prd.json")
	edited := strings.NewReplacer(`"go test ./..."`, `"true"`, `"critical": true, `, ``, `"allow_test_changes": true`, `"passes": true`).Replace(testPRD)
	write(t, prdFile, edited)
	write(t, filepath.Join(p.Root, ".ralph/config.yaml"), "gates:\n  test: \"true\"\ncouncil: 3\n")
	write(t, filepath.Join(p.Root, ".ralph/roles.yaml"), "triggers: []\n")

	msgs := g.Restore(p.Root)
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		"prd.json (quality_checks.test changed, S-1 critical removed, S-2 allow_test_changes removed)",
		".ralph/config.yaml (gates changed)",
		".ralph/roles.yaml (triggers changed)",
		"kept as .ralph/policy-edits/",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("Restore said\n%s\nwant %q in it", all, want)
		}
	}
	if got := read(t, filepath.Join(p.Root, ".ralph/config.yaml")); got != testConfig {
		t.Errorf("config.yaml = %q, want the pinned bytes", got)
	}
	if got := read(t, filepath.Join(p.Root, ".ralph/roles.yaml")); got != testRoles {
		t.Errorf("roles.yaml = %q, want the pinned bytes", got)
	}
	got := read(t, prdFile)
	for _, want := range []string{`"test": "go test ./..."`, `"critical": true`, `"allow_test_changes": true`, `"passes": true`} {
		if !strings.Contains(got, want) {
			t.Errorf("prd.json after restore lacks %s:\n%s", want, got)
		}
	}
	aside, _ := filepath.Glob(filepath.Join(p.Dir, "policy-edits", "*"))
	if len(aside) != 3 {
		t.Errorf("kept aside: %v, want the three edited files", aside)
	}
	if again := g.Restore(p.Root); len(again) != 0 {
		t.Errorf("a second Restore found %v, want nothing", again)
	}
}

// Stories added since the pin and a PRD's passes flags are no policy.
func TestRestoreLeavesNonPolicyAlone(t *testing.T) {
	p, g := repo(t)
	prdFile := filepath.Join(p.Root, "prd.json")
	edited := strings.Replace(testPRD, `"title": "two", "priority": 2,`, `"title": "two", "priority": 2, "passes": true, "notes": "n",`, 1)
	edited = strings.Replace(edited, "  ],", `    ,{"id": "S-3", "title": "new", "checks": ["true"]}
  ],`, 1)
	write(t, prdFile, edited)
	if msgs := g.Restore(p.Root); len(msgs) != 0 {
		t.Errorf("Restore found %v in edits of no policy", msgs)
	}
	if got := read(t, prdFile); got != edited {
		t.Errorf("prd.json was rewritten:\n%s", got)
	}
}

// An edit of the pinned snapshot itself is undone at once.
func TestRestoreRewritesTheSnapshot(t *testing.T) {
	p, g := repo(t)
	want := read(t, file(p))
	write(t, file(p), strings.Replace(want, "go test", "true ||", 1))
	msgs := g.Restore(p.Root)
	if len(msgs) != 1 || !strings.Contains(msgs[0], "policy.json, the run's pinned policy, was changed") {
		t.Errorf("Restore said %v", msgs)
	}
	if read(t, file(p)) != want {
		t.Error("policy.json was not restored")
	}
}

// A resume restores what changed before the files are read, and says so.
func TestCheckRestoresBeforeAResume(t *testing.T) {
	p, _ := repo(t)
	write(t, filepath.Join(p.Root, ".ralph/config.yaml"), "gates:\n  test: \"true\"\n")
	var errOut bytes.Buffer
	g, err := Check(p, Options{}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(p.Root, ".ralph/config.yaml")); got != testConfig {
		t.Errorf("config.yaml = %q after Check", got)
	}
	if !strings.Contains(errOut.String(), ".ralph/config.yaml was changed since run run-1 pinned its policy (council removed, gates changed); restored") ||
		!strings.Contains(errOut.String(), "--reload-policy") {
		t.Errorf("Check said %q", errOut.String())
	}
	events, _ := os.ReadFile(p.Events)
	if !strings.Contains(string(events), `"type":"tamper_detected"`) {
		t.Errorf("events: %s", events)
	}
	// The resume keeps the pinned policy.
	before := read(t, file(p))
	if _, err := g.Open("run-1", true); err != nil || read(t, file(p)) != before {
		t.Errorf("Open on a resume re-pinned (err %v)", err)
	}
}

// --reload-policy takes the files as they are, reports what it took, and
// pins them.
func TestCheckReloadTakesTheFiles(t *testing.T) {
	p, _ := repo(t)
	weak := "gates:\n  test: \"true\"\ncouncil: 3\n"
	write(t, filepath.Join(p.Root, ".ralph/config.yaml"), weak)
	var errOut bytes.Buffer
	g, err := Check(p, Options{Reload: true}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "policy reloaded (--reload-policy) for run run-1: .ralph/config.yaml: gates changed") {
		t.Errorf("Check said %q", errOut.String())
	}
	g.PRD = filepath.Join(p.Root, "prd.json")
	if _, err := g.Open("run-1", true); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(p.Root, ".ralph/config.yaml")) != weak {
		t.Error("the reloaded file was changed")
	}
	if msgs := g.Restore(p.Root); len(msgs) != 0 {
		t.Errorf("after the reload Restore found %v", msgs)
	}
}

// A snapshot without the run's seal (edited, or from another run) stops
// the resume; a completed run or --fresh starts anew without looking.
func TestCheckRefusesAForgedSnapshot(t *testing.T) {
	p, _ := repo(t)
	b := read(t, file(p))
	write(t, file(p), strings.Replace(b, `"test": "go test ./..."`, `"test": "true"`, 1))
	var errOut bytes.Buffer
	_, err := Check(p, Options{}, &errOut)
	if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), "does not carry the run's seal") {
		t.Fatalf("Check = %v, want a usage error about the seal", err)
	}
	if _, err := Check(p, Options{Fresh: true}, &errOut); err != nil {
		t.Errorf("--fresh: %v", err)
	}
	if _, err := Check(p, Options{Reload: true}, &errOut); err != nil {
		t.Errorf("--reload-policy: %v", err)
	}
	if err := os.Remove(file(p)); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(p, Options{}, &errOut); err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Errorf("a missing snapshot: %v", err)
	}
	if err := store.WriteJSON(p.State, &engine.State{Version: 1, RunID: "run-1", Source: "prd", Status: engine.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(p, Options{}, &errOut); err != nil {
		t.Errorf("a completed run: %v", err)
	}
}

// A story's own tree (a parallel run's worktree): its copy of a file
// pinned whole is merged with its work, so an agent's edit there is put
// back too; a pinned file the tree does not hold (.ralph/ is not checked
// out there) is not written into it.
func TestRestoreInAStorysTree(t *testing.T) {
	_, g := repo(t)
	wt := t.TempDir()
	write(t, filepath.Join(wt, ".ralph", "config.yaml"), "gates:\n  test: \"true\"\n")
	out := g.Restore(wt)
	if len(out) != 1 || !strings.Contains(out[0], ".ralph/config.yaml") {
		t.Fatalf("Restore(worktree) reported %q", out)
	}
	if got := read(t, filepath.Join(wt, ".ralph", "config.yaml")); got != testConfig {
		t.Fatalf("the worktree's config.yaml is %q, want the pinned one", got)
	}
	if _, err := os.Stat(filepath.Join(wt, ".ralph", "roles.yaml")); err == nil {
		t.Fatal("a pinned file the worktree did not hold was written into it")
	}
	if out := g.Restore(wt); len(out) != 0 {
		t.Fatalf("a second Restore found %q", out)
	}
}
