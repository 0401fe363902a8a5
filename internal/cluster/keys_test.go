package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// writeKey writes a worker's key file (mode 0600) and reads it back.
func writeKey(t *testing.T, secret []byte) *Key {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.key")
	if err := os.WriteFile(p, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := ReadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// workerKeys makes a key for each name in a keys file of its own: the
// file, its keyring and the workers' keys by name.
func workerKeys(t *testing.T, names ...string) (path string, ring *Keyring, keys map[string]*Key) {
	t.Helper()
	path = filepath.Join(t.TempDir(), KeysFile)
	keys = map[string]*Key{}
	for _, name := range names {
		_, secret, err := AddKey(path, name, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = writeKey(t, secret)
	}
	ring, err := OpenKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, ring, keys
}

// Keys are made, listed and revoked in the coordinator's file, which
// keeps only their public halves; a name is taken once, revoked or not;
// the worker's file is refused when others can read it or it is not a
// key.
func TestWorkerKeysAddRevoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".ralph", KeysFile)
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if keys, err := ReadKeys(path); err != nil || keys != nil {
		t.Fatalf("no file: %v %v", keys, err)
	}
	k1, secret, err := AddKey(path, "build-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := AddKey(path, "build-2", now); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	seedLine := strings.Fields(string(secret[strings.LastIndex(string(secret[:len(secret)-1]), "\n")+1:]))
	if len(seedLine) != 2 || seedLine[0] != "build-1" || strings.Contains(string(b), seedLine[1]) || !strings.Contains(string(b), k1.Public) {
		t.Fatalf("the coordinator's file holds more than the public key, or the worker's file is not NAME SEED:\n%s\n%s", b, secret)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("keys file mode %v", fi.Mode())
	}
	if _, _, err := AddKey(path, "build-1", now); err == nil || !strings.Contains(err.Error(), "a worker key named build-1 exists (in use)") {
		t.Fatalf("a second build-1: %v", err)
	}
	for _, bad := range []string{"", "a b", "../x", "-x", strings.Repeat("a", 64), "a.b"} {
		if _, _, err := AddKey(path, bad, now); err == nil {
			t.Errorf("key name %q taken", bad)
		}
	}
	k := writeKey(t, secret)
	if k.Name != "build-1" || k.Public != k1.Public {
		t.Fatalf("read back %+v, want %+v", k, k1)
	}
	// The worker's file: others may not read it; it must be a key.
	loose := filepath.Join(t.TempDir(), "loose.key")
	os.WriteFile(loose, secret, 0o644)
	if _, err := ReadKeyFile(loose); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key others can read: %v", err)
	}
	for name, text := range map[string]string{"token": "e2e-nats-token\n", "empty": "# nothing\n", "public": "build-1 " + k1.Public + "\n"} {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(text), 0o600)
		if _, err := ReadKeyFile(p); err == nil || !strings.Contains(err.Error(), "ralph worker key") && !strings.Contains(err.Error(), "no key in it") {
			t.Errorf("%s: %v", name, err)
		}
	}

	ring, err := OpenKeyring(path)
	if err != nil || !ring.Any() || len(ring.Active()) != 2 {
		t.Fatalf("keyring %v %v", ring, err)
	}
	got, already, err := RevokeKey(path, "build-1", now.Add(time.Hour))
	if err != nil || already || got.Revoked == nil || !got.Revoked.Equal(now.Add(time.Hour)) {
		t.Fatalf("revoke: %+v %v %v", got, already, err)
	}
	if _, already, _ := RevokeKey(path, "build-1", now); !already {
		t.Fatal("a second revoke was not told it was revoked already")
	}
	if _, _, err := RevokeKey(path, "nobody", now); err == nil || !strings.Contains(err.Error(), "no worker key named nobody (the keys: build-1, build-2)") {
		t.Fatalf("revoke an unknown key: %v", err)
	}
	if _, _, err := AddKey(path, "build-1", now); err == nil || !strings.Contains(err.Error(), "revoked on 2026-03-04") {
		t.Fatalf("a revoked name taken again: %v", err)
	}
	if changed, err := ring.Refresh(); err != nil || !changed || !ring.Revoked("build-1") || ring.Revoked("build-2") || len(ring.Active()) != 1 {
		t.Fatalf("refresh after the revocation: %v %v %+v", changed, err, ring.Active())
	}
	if changed, _ := ring.Refresh(); changed {
		t.Fatal("a refresh with no change said it changed")
	}
	// A broken file keeps the keys as they were.
	os.WriteFile(path, []byte("{"), 0o600)
	if _, err := ring.Refresh(); err == nil || len(ring.Active()) != 1 {
		t.Fatalf("a broken keys file: %v %+v", err, ring.Active())
	}
}

// A report counts only signed by the key of the worker it names, that key
// not revoked, with nothing changed after signing.
func TestOutcomeSignatures(t *testing.T) {
	path, ring, keys := workerKeys(t, "w1", "w2")
	now := time.Now()
	k1, k2 := keys["w1"], keys["w2"]
	signed := func(k *Key, o outcome) outcome {
		t.Helper()
		if err := k.signOutcome(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	verify := func(o outcome) error { return ring.Verify(o.Worker, o.signed(), o.Sig) }
	o := outcome{Key: "job", Worker: "w1", Secret: "s", Commit: strings.Repeat("a", 40)}
	if err := verify(signed(k1, o)); err != nil {
		t.Fatalf("w1's own report: %v", err)
	}
	if err := verify(o); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("unsigned: %v", err)
	}
	if err := verify(signed(k2, o)); err == nil || !strings.Contains(err.Error(), "does not hold for worker w1's key") {
		t.Fatalf("w2 signing as w1: %v", err)
	}
	changed := signed(k1, o)
	changed.Commit = strings.Repeat("b", 40)
	if err := verify(changed); err == nil {
		t.Fatal("a report changed after signing was taken")
	}
	if err := verify(signed(k1, outcome{Key: "job", Worker: "w3"})); err == nil || !strings.Contains(err.Error(), "no worker key is named w3") {
		t.Fatalf("an unknown worker: %v", err)
	}
	RevokeKey(path, "w1", now)
	ring.Refresh()
	if err := verify(signed(k1, o)); err == nil || !strings.Contains(err.Error(), "worker w1's key was revoked") {
		t.Fatalf("a revoked key's report: %v", err)
	}
}

// The embedded server with worker keys admits the coordinator's own key
// and the workers' keys, no token; a key it stops admitting (revoked) is
// disconnected at once, told so (Refused), and refused when it tries
// again, while the other workers stay connected.
func TestServerAdmitsByKey(t *testing.T) {
	needEmbeddedServer(t)
	path, ring, keys := workerKeys(t, "w1", "w2")
	now := time.Now()
	k1, k2 := keys["w1"], keys["w2"]
	self, err := NewKey("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	srv, url, err := StartServer("127.0.0.1:0", t.TempDir(), ServerAuth{Self: self, Keys: ring.Active()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	connect := func(o ConnOptions) (*nats.Conn, chan error) {
		t.Helper()
		refused := make(chan error, 8)
		o.Refused = func(err error) { refused <- err }
		nc, err := Connect(url, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc, refused
	}
	connected := func(nc *nats.Conn) bool {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !nc.IsConnected() {
			time.Sleep(20 * time.Millisecond)
		}
		return nc.IsConnected()
	}
	coord, _ := connect(ConnOptions{Own: self})
	w1, refused1 := connect(ConnOptions{Own: k1})
	w2, _ := connect(ConnOptions{Own: k2})
	for name, nc := range map[string]*nats.Conn{"coordinator": coord, "w1": w1, "w2": w2} {
		if !connected(nc) {
			t.Fatalf("%s did not connect", name)
		}
	}
	// No token, no unknown key.
	stranger, _ := NewKey("stranger")
	for name, o := range map[string]ConnOptions{"a token": {Token: "guess-0123456789"}, "an unknown key": {Own: stranger}} {
		nc, refused := connect(o)
		select {
		case err := <-refused:
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: never refused", name)
		}
		if nc.IsConnected() {
			t.Errorf("%s connected", name)
		}
	}
	if _, _, err := RevokeKey(path, "w1", now); err != nil {
		t.Fatal(err)
	}
	ring.Refresh()
	if err := srv.Admit(ring.Active()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused1:
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("w1 was told %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked worker was not refused")
	}
	time.Sleep(300 * time.Millisecond) // its reconnects keep failing
	if w1.IsConnected() {
		t.Fatal("the revoked worker is connected")
	}
	if !w2.IsConnected() || !coord.IsConnected() {
		t.Fatal("revoking w1 disconnected others")
	}
	// A token server does not admit by key.
	tokenSrv, _, err := StartServer("127.0.0.1:0", t.TempDir(), ServerAuth{Token: "t-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	defer tokenSrv.Shutdown()
	if err := tokenSrv.Admit(nil); err == nil {
		t.Fatal("a token server took keys")
	}
}
