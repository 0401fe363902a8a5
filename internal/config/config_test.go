package config

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := parse("config.yaml", []byte("agent: codex\nmax_attempts: 4\niteration_timeout: 90s\nbreaker: 0\ngates:\n  test: go test ./...\nenv:\n  FOO: bar\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent != "codex" || c.MaxAttempts != 4 || time.Duration(c.IterationTimeout) != 90*time.Second || c.Breaker == nil || *c.Breaker != 0 || c.Gates["test"] != "go test ./..." || c.Env["FOO"] != "bar" {
		t.Fatalf("%+v", c)
	}
}

func TestUnknownKeyNamesLine(t *testing.T) {
	_, err := parse("config.yaml", []byte("agent: claude\nmax_attempt: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "config.yaml") || !strings.Contains(err.Error(), "2:") {
		t.Fatalf("want an error naming config.yaml line 2, got %v", err)
	}
}

func TestBadDuration(t *testing.T) {
	_, err := parse("config.yaml", []byte("iteration_timeout: soon\n"))
	if err == nil || !strings.Contains(err.Error(), "invalid duration") {
		t.Fatalf("got %v", err)
	}
}

func TestTemplateParses(t *testing.T) {
	if _, err := parse("template", []byte(Template)); err != nil {
		t.Fatal(err)
	}
}

// Negative numbers are errors naming file, line, key and value (all of
// them at once), never silently replaced by the defaults.
func TestNegativeNumbersAreErrors(t *testing.T) {
	_, err := parse("c.yaml", []byte("agent: cmd\nmax_iterations: -3\nparallel: 2\ngate_timeout: -5s\nbreaker: -1\nmax_cost: -0.5\ntest_fix: -1\ncouncil: -3\n"))
	if err == nil {
		t.Fatal("negative numbers accepted")
	}
	for _, want := range []string{
		"c.yaml:2: max_iterations must not be negative, got -3",
		"c.yaml:4: gate_timeout must not be negative, got -5s",
		"c.yaml:5: breaker must not be negative, got -1",
		"c.yaml:6: max_cost must not be negative, got -0.5",
		"c.yaml:7: test_fix must not be negative, got -1",
		"c.yaml:8: council must not be negative, got -3",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := parse("c.yaml", []byte("max_iterations: 0\nbreaker: 0\n")); err != nil {
		t.Fatalf("zero refused: %v", err)
	}
}
