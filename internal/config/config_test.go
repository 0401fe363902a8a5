package config

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := Parse("config.yaml", []byte("agent: codex\nmax_attempts: 4\niteration_timeout: 90s\nbreaker: 0\ngates:\n  test: go test ./...\nenv:\n  FOO: bar\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent != "codex" || c.MaxAttempts != 4 || time.Duration(c.IterationTimeout) != 90*time.Second || c.Breaker == nil || *c.Breaker != 0 || c.Gates["test"] != "go test ./..." || c.Env["FOO"] != "bar" {
		t.Fatalf("%+v", c)
	}
}

func TestUnknownKeyNamesLine(t *testing.T) {
	_, err := Parse("config.yaml", []byte("agent: claude\nmax_attempt: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "config.yaml") || !strings.Contains(err.Error(), "2:") {
		t.Fatalf("want an error naming config.yaml line 2, got %v", err)
	}
}

func TestBadDuration(t *testing.T) {
	_, err := Parse("config.yaml", []byte("iteration_timeout: soon\n"))
	if err == nil || !strings.Contains(err.Error(), "invalid duration") {
		t.Fatalf("got %v", err)
	}
}

func TestTemplateParses(t *testing.T) {
	if _, err := Parse("template", []byte(Template)); err != nil {
		t.Fatal(err)
	}
}
