//go:build !natsserver

package cluster

// EmbeddedServer: this build has the NATS server `ralph coordinator`
// starts when it is given no --nats URL. Without the natsserver build tag
// it has none: nats-server is one large package that takes half a minute
// to compile on its own, most of a newcomer's first `go run ./cmd/ralph
// demo`, for a command few people run.
const EmbeddedServer = false

// Server is the embedded NATS server; a build without it has none.
type Server struct{}

// StartServer fails: this build has no embedded server.
func StartServer(listen, dir string, auth ServerAuth) (*Server, string, error) {
	return nil, "", ErrNoEmbeddedServer
}

// Admit, Shutdown and WaitForShutdown are never reached: no Server is
// ever made.
func (s *Server) Admit([]WorkerKey) error { return ErrNoEmbeddedServer }
func (s *Server) Shutdown()               {}
func (s *Server) WaitForShutdown()        {}
