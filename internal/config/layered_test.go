package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadLayeredPrecedence(t *testing.T) {
	user := UserPath()
	if err := os.MkdirAll(filepath.Dir(user), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(user)
	if err := os.WriteFile(user, []byte("agent: codex\nmodel: m-user\nsandbox:\n  writable: [/u]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(repo, []byte("# repo\nmodel: m-repo\nsandbox:\n  writable: [/r]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := LoadLayered(repo)
	if err != nil {
		t.Fatal(err)
	}
	if l.Agent != "codex" || l.Model != "m-repo" {
		t.Fatalf("agent %q model %q: want codex from the user's file, m-repo from the repository's", l.Agent, l.Model)
	}
	if got := l.From["model"]; len(got) != 1 || got[0] != (Origin{repo, 2}) {
		t.Fatalf("model from %v", got)
	}
	if got := l.From["agent"]; len(got) != 1 || got[0] != (Origin{user, 1}) {
		t.Fatalf("agent from %v", got)
	}
	if strings.Join(l.Sandbox.Writable, ",") != "/u,/r" || len(l.From["sandbox"]) != 2 {
		t.Fatalf("sandbox writable %v from %v: the lists add up", l.Sandbox.Writable, l.From["sandbox"])
	}
	if _, ok := l.From["prd"]; ok {
		t.Fatal("prd is set by neither file")
	}

	if err := os.WriteFile(user, []byte("agent: codex\nmodle: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadLayered(repo)
	if err == nil || !strings.Contains(err.Error(), user) || !strings.Contains(err.Error(), "[2:1]") && !strings.Contains(err.Error(), "2 |") {
		t.Fatalf("a typo in the user's file: %v, want its path and line", err)
	}
}
