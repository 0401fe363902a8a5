package cluster

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func testJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	needEmbeddedServer(t)
	srv, url, err := StartServer("127.0.0.1:0", t.TempDir(), ServerAuth{Token: "lease-test-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	if _, _, err := StartServer("127.0.0.1:0", t.TempDir(), ServerAuth{}); err == nil {
		t.Fatal("an embedded server without a token started")
	}
	nc, err := Connect(url, ConnOptions{Token: "lease-test-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// One coordinator per run: a second is refused naming the first, another
// run is not; --take-over takes the lease, and the first one learns it
// lost it; a released lease is free at once.
func TestLease(t *testing.T) {
	js := testJS(t)
	ctx := t.Context()
	host, _ := os.Hostname()
	first := Holder{ID: "one", Host: "elsewhere", PID: 1, Dir: "/a"}
	l1, before, err := Acquire(ctx, js, "ralph_d", first, 3*time.Second, false)
	if err != nil || before != nil {
		t.Fatalf("first: %v %v", before, err)
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go l1.Keep(kctx)
	_, held, err := Acquire(ctx, js, "ralph_d", Holder{ID: "two", Host: host, PID: os.Getpid(), Dir: "/b"}, 3*time.Second, false)
	if !errors.Is(err, ErrLeaseHeld) || held == nil || held.ID != "one" || !strings.Contains(err.Error(), "pid 1 on elsewhere in /a") {
		t.Fatalf("second: %v %v", held, err)
	}
	other, _, err := Acquire(ctx, js, "ralph_e", Holder{ID: "three", Host: host, PID: os.Getpid()}, 3*time.Second, false)
	if err != nil {
		t.Fatalf("another run: %v", err)
	}
	other.Release(ctx)
	l2, before, err := Acquire(ctx, js, "ralph_d", Holder{ID: "two", Host: host, PID: os.Getpid(), Dir: "/b"}, 3*time.Second, true)
	if err != nil || before == nil || before.ID != "one" {
		t.Fatalf("take-over: %v %v", before, err)
	}
	select {
	case <-l1.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the first holder did not learn it lost the lease")
	}
	if h, err := l1.Holder(ctx); err != nil || h.ID != "two" {
		t.Fatalf("holder after the take-over: %v %v", h, err)
	}
	l1.Release(ctx) // lost: changes nothing
	if h, _ := l2.Holder(ctx); h.ID != "two" {
		t.Fatalf("the lost holder released the new one's lease: %v", h)
	}
	l2.Release(ctx)
	if _, _, err := Acquire(ctx, js, "ralph_d", Holder{ID: "four", Host: "elsewhere", PID: 2}, 3*time.Second, false); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// A holder that is a dead process of this machine is taken over at once.
func TestLeaseDeadHolder(t *testing.T) {
	js := testJS(t)
	host, _ := os.Hostname()
	if _, _, err := Acquire(t.Context(), js, "r", Holder{ID: "dead", Host: host, PID: 1 << 22}, time.Minute, false); err != nil {
		t.Fatal(err)
	}
	if _, before, err := Acquire(t.Context(), js, "r", Holder{ID: "next", Host: host, PID: os.Getpid()}, time.Minute, false); err != nil || before == nil {
		t.Fatalf("%v %v", before, err)
	}
}

// Jobs carry ralph's own variables, never the config's env: values or
// anything named like a secret.
func TestJobEnv(t *testing.T) {
	got := jobEnvOf([]string{"OPENAI_API_KEY=sk-1", "FOO=bar", "RALPH_ITEM_ID=S-1", "RALPH_API_TOKEN=x", "RALPH_WORK_DIR=/w"})
	if !slices.Equal(got, []string{"RALPH_ITEM_ID=S-1", "RALPH_WORK_DIR=/w"}) {
		t.Fatalf("%v", got)
	}
}

// A pause lasts at most max from when it was set.
func TestBoundPause(t *testing.T) {
	set := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	far := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := boundPause(far, set, time.Minute); !got.Equal(set.Add(time.Minute)) {
		t.Fatal(got)
	}
	if got := boundPause(set.Add(time.Second), set, time.Minute); !got.Equal(set.Add(time.Second)) {
		t.Fatal(got)
	}
	if got := boundPause(far, set, 0); !got.Equal(set.Add(DefaultMaxPause)) {
		t.Fatal(got)
	}
}

// needEmbeddedServer skips a test that starts the embedded NATS server in
// a build without it (go test without -tags natsserver; make check sets
// the tag, and tests the build without it in TestNoEmbeddedServer).
func needEmbeddedServer(t *testing.T) {
	t.Helper()
	if !EmbeddedServer {
		t.Skip("needs the embedded NATS server: go test -tags natsserver (make check sets it)")
	}
}
