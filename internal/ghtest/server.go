// Package ghtest is a scripted GitHub API server for tests: the real gh
// CLI talks to it as an enterprise host (GH_HOST, see HostName), over TLS
// with a
// certificate made for it and trusted through SSL_CERT_FILE. (gh talks
// to https://HOST/api/graphql and /api/v3/ for a host that is not
// github.com.) It keeps
// one repository's issues and pull requests in memory and records every
// request, so a test asserts what gh asked, not what ralph meant to ask.
package ghtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Token is the token the test environment hands gh (GH_ENTERPRISE_TOKEN);
// a request without it is refused, as GitHub would.
const Token = "ghtest-token"

// Issue is one issue of the repository.
type Issue struct {
	Number   int      `json:"number"`
	Title    string   `json:"title"`
	Body     string   `json:"body"`
	Labels   []string `json:"labels,omitempty"`
	Closed   bool     `json:"closed,omitempty"`
	Comments []string `json:"comments,omitempty"`
}

// PR is one pull request of the repository.
type PR struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Head   string `json:"head"`
	Base   string `json:"base"`
	Draft  bool   `json:"draft"`
	Closed bool   `json:"closed,omitempty"`
	// Reviews are the reviews posted on it (gh pr review).
	Reviews []Review `json:"reviews,omitempty"`
}

// Review is one pull-request review: its event (COMMENT,
// REQUEST_CHANGES, APPROVE) and body.
type Review struct {
	Event string `json:"event"`
	Body  string `json:"body"`
}

// Request is what the server records about one request: for GraphQL the
// operation name and its variables, for REST the method and path.
type Request struct {
	Method    string          `json:"method"`
	Path      string          `json:"path"`
	Operation string          `json:"operation,omitempty"`
	Variables json.RawMessage `json:"variables,omitempty"`
	Status    int             `json:"status"`
}

// HostName is the GitHub host the server plays. gh drops a port from a
// remote's URL when it matches remotes to GH_HOST, so the host is a name
// of its own (no port) that gh reaches through the server's CONNECT proxy
// (HTTPS_PROXY): Go's clients never proxy loopback names, and a real name
// needs no root for port 443.
const HostName = "github.ghtest"

// Server is a running scripted GitHub.
type Server struct {
	Owner, Name string
	// Host is what GH_HOST names.
	Host string
	// Proxy is the CONNECT proxy's URL (HTTPS_PROXY) that leads to it.
	Proxy string
	// CertFile is the server's certificate (PEM), for SSL_CERT_FILE.
	CertFile string

	srv, proxy *http.Server
	tlsAddr    string
	logPath    string

	mu     sync.Mutex
	issues map[int]*Issue
	prs    map[int]*PR
	next   int // the next issue or pull request number
	reqs   []Request
}

// Start serves the repository owner/name on loopback. dir receives the
// certificate and requests.jsonl (every request, one JSON line each).
func Start(dir, owner, name string) (*Server, error) {
	cert, pemBytes, err := selfSigned()
	if err != nil {
		return nil, err
	}
	s := &Server{Owner: owner, Name: name, Host: HostName, CertFile: filepath.Join(dir, "cert.pem"), logPath: filepath.Join(dir, "requests.jsonl"),
		issues: map[int]*Issue{}, prs: map[int]*PR{}, next: 1}
	if err := os.WriteFile(s.CertFile, pemBytes, 0o644); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.tlsAddr = ln.Addr().String()
	s.srv = &http.Server{Handler: s, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.ServeTLS(ln, "", "")
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.srv.Close()
		return nil, err
	}
	s.Proxy = "http://" + pln.Addr().String()
	s.proxy = &http.Server{Handler: http.HandlerFunc(s.connect), ReadHeaderTimeout: 10 * time.Second}
	go s.proxy.Serve(pln)
	return s, nil
}

// connect is the proxy: a CONNECT to the host (any port) is a tunnel to
// the TLS server; anything else is refused.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.Host)
	if r.Method != http.MethodConnect || (host != HostName && r.Host != HostName) {
		http.Error(w, "ghtest proxy: only CONNECT "+HostName, http.StatusForbidden)
		return
	}
	up, err := net.Dial("tcp", s.tlsAddr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	go func() {
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Reader.Peek(n)
			up.Write(b)
		}
		io.Copy(up, down)
		up.Close()
	}()
	go func() {
		io.Copy(down, up)
		down.Close()
	}()
}

// Close stops the server.
func (s *Server) Close() error {
	s.proxy.Close()
	return s.srv.Close()
}

// Env is the environment that points gh at the server: its host, the
// token, the proxy and the trusted certificate; gh finds the repository
// from the git remote (RemoteURL), as it does for a user. configDir keeps
// gh's own config away from the user's.
func (s *Server) Env(configDir string) []string {
	return []string{
		"GH_HOST=" + s.Host,
		"GH_ENTERPRISE_TOKEN=" + Token,
		"HTTPS_PROXY=" + s.Proxy,
		"https_proxy=" + s.Proxy,
		"NO_PROXY=",
		"no_proxy=",
		"SSL_CERT_FILE=" + s.CertFile,
		"GH_CONFIG_DIR=" + configDir,
		"GH_NO_UPDATE_NOTIFIER=1",
		"GH_PROMPT_DISABLED=1",
		"NO_COLOR=1",
	}
}

// RemoteURL is the repository's URL on the server: gh's pr commands
// want a git remote that names the host (a test points the remote's push
// URL at a local bare repository, git remote set-url --push).
func (s *Server) RemoteURL() string {
	return "https://" + s.Host + "/" + s.Owner + "/" + s.Name + ".git"
}

// AddIssue opens an issue and returns its number.
func (s *Server) AddIssue(title, body string, labels ...string) int {
	return s.add(func(n int) { s.issues[n] = &Issue{Number: n, Title: title, Body: body, Labels: labels} })
}

// AddPR opens a pull request from head into base and returns its number.
func (s *Server) AddPR(head, base, title string) int {
	return s.add(func(n int) { s.prs[n] = &PR{Number: n, Title: title, Head: head, Base: base} })
}

// add takes the next issue or pull request number for make.
func (s *Server) add(make func(n int)) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next
	s.next++
	make(n)
	return n
}

// Issues are the repository's issues in number order.
func (s *Server) Issues() []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copies(s.issues)
}

// PRs are the repository's pull requests in number order.
func (s *Server) PRs() []PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copies(s.prs)
}

// copies are m's values in key order.
func copies[V any](m map[int]*V) []V {
	out := []V{}
	for _, n := range sortedKeys(m) {
		out = append(out, *m[n])
	}
	return out
}

// Requests are the requests served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Operations are the requests so far, one word each: the GraphQL
// operation's name or the REST method and path.
func (s *Server) Operations() []string {
	var out []string
	for _, r := range s.Requests() {
		if r.Operation != "" {
			out = append(out, r.Operation)
		} else {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := Request{Method: r.Method, Path: r.URL.RequestURI()}
	status, answer := http.StatusUnauthorized, any(map[string]string{"message": "Bad credentials"})
	if r.Header.Get("Authorization") == "token "+Token {
		s.mu.Lock()
		if r.URL.Path == "/api/graphql" {
			status, answer = s.graphQL(body, &rec)
		} else {
			status, answer = s.rest(r.Method, strings.TrimPrefix(r.URL.Path, "/api/v3"), body)
		}
		s.mu.Unlock()
	}
	rec.Status = status
	s.record(rec)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer)
}

func (s *Server) record(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, rec)
	line, _ := json.Marshal(rec)
	if f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		f.Write(append(line, '\n'))
		f.Close()
	}
}

// rest answers the few REST calls gh makes besides GraphQL.
func (s *Server) rest(method, path string, body []byte) (int, any) {
	return http.StatusNotFound, map[string]string{"message": "Not Found: " + method + " " + path}
}

var operationName = regexp.MustCompile(`(?:query|mutation)\s+(\w+)`)

// graphQL answers the operations gh's issue and pr commands send, by
// operation name. Called with s.mu held.
func (s *Server) graphQL(body []byte, rec *Request) (int, any) {
	var q struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal(body, &q); err != nil {
		return http.StatusBadRequest, map[string]string{"message": err.Error()}
	}
	if m := operationName.FindStringSubmatch(q.Query); m != nil {
		rec.Operation = m[1]
	}
	rec.Variables, _ = json.Marshal(q.Variables)
	data, err := s.operation(rec.Operation, q.Query, q.Variables)
	if err != nil {
		return http.StatusOK, map[string]any{"errors": []map[string]string{{"type": "NOT_FOUND", "message": err.Error()}}}
	}
	return http.StatusOK, map[string]any{"data": data}
}

// selfSigned makes the server's certificate: localhost and 127.0.0.1,
// its own issuer, so SSL_CERT_FILE holding it makes gh trust it.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: HostName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		DNSNames: []string{HostName},
		IsCA:     true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
