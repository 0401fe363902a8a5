package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAgentsPatterns(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"# notes\n", ""},
		{"x\n" + AgentsPatternsBegin + "\n## Codebase Patterns\n- a\n- b\n" + AgentsPatternsEnd + "\ny\n", "- a\n- b"},
		{AgentsPatternsBegin + "\n## codebase patterns\n" + AgentsPatternsEnd, ""},
		{AgentsPatternsBegin + "\n- no heading\n" + AgentsPatternsEnd, "- no heading"},
		{AgentsPatternsBegin + "\n- unended\n", ""},
		{AgentsPatternsEnd + "\n- end first\n" + AgentsPatternsBegin, ""},
	} {
		if got := AgentsPatterns(c.in); got != c.want {
			t.Errorf("AgentsPatterns(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzAgentsPatterns(f *testing.F) {
	f.Add("x\n" + AgentsPatternsBegin + "\n## Codebase Patterns\n- a\n" + AgentsPatternsEnd + "\n")
	f.Add(AgentsPatternsBegin + AgentsPatternsEnd + AgentsPatternsBegin)
	f.Fuzz(func(t *testing.T, s string) {
		got := AgentsPatterns(s)
		if strings.Contains(got, AgentsPatternsEnd) {
			t.Errorf("the section runs past its end marker: %q", got)
		}
		if got != "" && !strings.Contains(s, got) {
			t.Errorf("%q is not from the file %q", got, s)
		}
	})
}

// The digest: the file's section first (bounded), then ralph's entries.
func TestDigestAgents(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "AGENTS.md")
	progress := filepath.Join(dir, "progress.md")
	m := newMemory(100) // patterns: 100 bytes
	if err := os.WriteFile(progress, []byte("## entry 1\n- did a thing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := m.digestAgents(file, "AGENTS.md", progress); got != "## entry 1\n- did a thing" {
		t.Errorf("no file: %q", got)
	}
	long := strings.Repeat("- a pattern to keep\n", 20)
	if err := os.WriteFile(file, []byte("# x\n"+AgentsPatternsBegin+"\n## Codebase Patterns\n"+long+AgentsPatternsEnd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := m.digestAgents(file, "AGENTS.md", progress)
	if !strings.HasPrefix(got, "## Codebase Patterns (from AGENTS.md)\n\n- a pattern to keep\n") || !strings.Contains(got, "the whole section is in AGENTS.md") || !strings.HasSuffix(got, "## entry 1\n- did a thing") {
		t.Errorf("digest = %q", got)
	}
	if len(got) > 100+200 {
		t.Errorf("the patterns are not bounded: %d bytes", len(got))
	}
}
