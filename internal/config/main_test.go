package config

import (
	"os"
	"testing"
)

// TestMain points the user's config folder at an empty one: a developer's
// ~/.config/ralph/config.yaml never takes part in the tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ralph-config-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
