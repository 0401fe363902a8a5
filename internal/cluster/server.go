//go:build natsserver

package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedServer: this build has the NATS server `ralph coordinator`
// starts when it is given no --nats URL.
const EmbeddedServer = true

// Server is the embedded NATS server.
type Server struct {
	*server.Server
	mu   sync.Mutex
	opts *server.Options
	self string // the coordinator's own key, with worker keys
}

// StartServer starts the embedded NATS server with JetStream, storing in
// dir, on listen (host:port; port 0 picks a free one). Every client must
// give auth.Token, or its key (auth.Self), on loopback too: any local
// process could otherwise read the jobs and answer them. It returns the
// server and the URL clients use (tls:// with TLS).
func StartServer(listen, dir string, auth ServerAuth) (*Server, string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, "", fmt.Errorf("--listen %q: want host:port", listen)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, "", fmt.Errorf("--listen %q: bad port", listen)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	opts := &server.Options{Host: host, Port: p, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
		MaxPayload: 8 << 20, ServerName: "ralph-coordinator"}
	var self string
	switch {
	case auth.Self != nil:
		self = auth.Self.Public
		opts.Nkeys = nkeyUsers(self, auth.Keys)
	case auth.Token != "":
		opts.Authorization = auth.Token
	default:
		return nil, "", errors.New("the embedded NATS server needs a token or keys for its clients")
	}
	if auth.TLSCert != "" || auth.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(auth.TLSCert, auth.TLSKey)
		if err != nil {
			return nil, "", fmt.Errorf("the NATS server's TLS certificate: %w", err)
		}
		opts.TLS, opts.TLSTimeout = true, 5
		opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, "", err
	}
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, "", errors.New("the embedded NATS server did not start")
	}
	return &Server{Server: s, opts: opts, self: self}, s.ClientURL(), nil
}

// nkeyUsers are the server's users: the coordinator's key and keys.
func nkeyUsers(self string, keys []WorkerKey) []*server.NkeyUser {
	users := []*server.NkeyUser{{Nkey: self}}
	for _, k := range keys {
		if k.Revoked == nil {
			users = append(users, &server.NkeyUser{Nkey: k.Public})
		}
	}
	return users
}

// Admit makes a server that admits by key admit the coordinator and
// keys, and nobody else: a client logged in with another key (a revoked
// one) is disconnected at once, and refused when it tries again.
func (s *Server) Admit(keys []WorkerKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.self == "" {
		return errors.New("the embedded NATS server admits by token, not by key")
	}
	o := s.opts.Clone()
	o.Nkeys = nkeyUsers(s.self, keys)
	if err := s.ReloadOptions(o); err != nil {
		return fmt.Errorf("changing the NATS server's keys: %w", err)
	}
	s.opts = o
	return nil
}
