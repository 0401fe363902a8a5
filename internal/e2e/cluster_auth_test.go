package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ralph e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(priv)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// The embedded NATS server admits only its token's holders, on loopback
// too, and speaks TLS when given a certificate. The token is generated
// once, kept 0600 and shown once; workers take it from a copy of the file.
// Attacks: a NATS client without the token, or with a wrong one, is
// refused; a worker without credentials does not start. No secret of the
// config's env: travels in a job, and the worker's agent never sees the
// NATS token.
func TestClusterCredentials(t *testing.T) {
	bin := buildRalph(t)
	const agentSh = `cat > /dev/null
echo "secret=[$MY_API_KEY] nats=[$RALPH_NATS_TOKEN] item=[$RALPH_ITEM_ID]" > "$MARK/env-$RALPH_ITEM_ID"
echo "$RALPH_ITEM_ID" > "out-$RALPH_ITEM_ID.txt"
echo '<promise>COMPLETE</promise>'
`
	prd := `{"project":"d","branch_name":"ralph/d","user_stories":[{"id":"S-1","title":"a","priority":1,"checks":["test -f out-S-1.txt"]},{"id":"S-2","title":"b","priority":2,"checks":["test -f out-S-2.txt"]}],"quality_checks":{"test":"test -f agent.sh"}}`
	repo, remote, mark, url := clusterRepo(t, map[string]string{"prd.json": prd, "agent.sh": agentSh})
	const apiKey = "sk-test-0123456789abcdefghijklmnop"
	os.MkdirAll(filepath.Join(repo, ".ralph"), 0o755)
	os.WriteFile(filepath.Join(repo, ".ralph", "config.yaml"), []byte("env:\n  MY_API_KEY: "+apiKey+"\n"), 0o644)
	cert, key := selfSigned(t, t.TempDir())
	env := []string{"MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url, "--listen-tls-cert", cert, "--listen-tls-key", key)...)
	tokenFile := filepath.Join(repo, ".ralph", "nats-token")
	waitFor(t, func() bool { return strings.Contains(co.out.String(), "start workers with") }, co)
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(b))
	if strings.Count(co.out.String(), token) != 1 {
		t.Fatalf("the generated token is not shown once:\n%s", co)
	}
	tlsURL := "tls://" + strings.TrimPrefix(url, "nats://")
	if !strings.Contains(co.out.String(), "ralph worker --nats "+tlsURL) {
		t.Fatalf("the coordinator does not name its TLS address:\n%s", co)
	}
	// Attack: clients without the token, with a wrong one, without TLS.
	for name, opts := range map[string][]nats.Option{
		"no token":    {nats.RootCAs(cert)},
		"wrong token": {nats.RootCAs(cert), nats.Token("guess-0123456789")},
	} {
		if nc, err := nats.Connect(tlsURL, opts...); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !strings.Contains(err.Error(), "uthorization") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if nc, err := nats.Connect(url, nats.Token(token)); err == nil {
		nc.Close()
		t.Error("a client without TLS connected")
	}
	// Attack: a worker with no credentials is refused before it connects.
	if r := runBin(t, t.TempDir(), "", env, bin, "worker", "--nats", tlsURL, "--dir", "w"); r.code != 2 || !strings.Contains(r.stderr, "no NATS credentials") {
		t.Fatalf("a worker without credentials: exit %d\n%s", r.code, r.stderr)
	}
	wdir := t.TempDir()
	copyFile := filepath.Join(wdir, "nats-token")
	os.WriteFile(copyFile, b, 0o600)
	w := startBg(t, wdir, env, bin, "worker", "--nats", tlsURL, "--token-file", copyFile, "--tls-ca", cert, "--dir", "w")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s", code, co, w)
	}
	requireOneEach(t, remote, 2, co, w)
	for _, id := range []string{"S-1", "S-2"} {
		got, _ := os.ReadFile(filepath.Join(mark, "env-"+id))
		if string(got) != "secret=[] nats=[] item=["+id+"]\n" {
			t.Errorf("the worker's agent saw %q", got)
		}
	}
}
