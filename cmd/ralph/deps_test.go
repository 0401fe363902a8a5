package main

import (
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// depsFile lists every module that links into the ralph binary, with its
// version: a new dependency (or an upgrade) changes it, so it shows in the
// diff of the change that brings it. RALPH_UPDATE_DEPS=1 rewrites it.
const depsFile = "../../testdata/deps.txt"

func TestLinkedModules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	// One platform, so the list does not depend on the machine's: the
	// darwin build links the same modules (its build-tagged files differ
	// only inside ralph's own packages). The release binaries' build tags,
	// whatever GOFLAGS says (make check's has them, a plain go test not).
	cmd := exec.Command("go", "list", "-tags", "natsserver", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	set := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			set[l] = true
		}
	}
	var got []string
	for m := range set {
		got = append(got, m)
	}
	sort.Strings(got)
	text := "# Modules linked into the release binaries (go list -tags natsserver -deps ./cmd/ralph, linux/amd64).\n# RALPH_UPDATE_DEPS=1 go test ./cmd/ralph -run TestLinkedModules rewrites it.\n" + strings.Join(got, "\n") + "\n"
	if os.Getenv("RALPH_UPDATE_DEPS") == "1" {
		if err := os.WriteFile(depsFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(depsFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != text {
		t.Errorf("the modules linked into ralph changed; if that is meant, run RALPH_UPDATE_DEPS=1 go test ./cmd/ralph -run TestLinkedModules and commit testdata/deps.txt.\nwant:\n%s\ngot:\n%s", want, text)
	}
}
