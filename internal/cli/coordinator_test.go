package cli

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/usage"
)

// A ralph built without the embedded NATS server (no natsserver tag: a
// plain go run or go install) refuses `ralph coordinator` without --nats
// at once, as invalid input that says what to do, and writes nothing (no
// token file). make check runs this test in a build without the tag too.
func TestCoordinatorWithoutEmbeddedServer(t *testing.T) {
	if cluster.EmbeddedServer {
		t.Skip("this build embeds the NATS server; make check also runs: go test -tags= -run WithoutEmbeddedServer ./internal/cli")
	}
	root := t.TempDir()
	co := &coordinatorFlags{Remote: "/srv/git/app.git", Listen: cluster.DefaultListen, Lease: time.Minute, QueueTimeout: time.Minute, MaxPause: time.Minute}
	_, err := co.Start(t.Context(), &app.Options{}, root, nil, nil)
	if err == nil || !usage.Is(err) {
		t.Fatalf("want a usage error, got %v", err)
	}
	for _, want := range []string{"without the embedded NATS server", "--nats nats://HOST:4222", "go install -tags natsserver"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) > 0 {
		t.Errorf("the refused coordinator wrote %v", entries)
	}
	help := newCmdCoordinator(testFactory(t), nil).Flags().Lookup("nats").Usage
	if !strings.Contains(help, "required") {
		t.Errorf("--nats's help does not say it is required here: %q", help)
	}
}
