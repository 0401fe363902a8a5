package app

import (
	"os"
	"testing"

	"github.com/ralph-loop/ralph/internal/testenv"
)

// TestMain gives the tests their own XDG dirs: a developer's
// ~/.config/ralph/config.yaml never takes part in them.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
