package proc

import "context"

// Confiner rewrites a command so that it runs confined (internal/sandbox:
// inside bubblewrap). Exec applies the Confiner its context carries to
// every command it starts, so an agent adapter or a gate runner needs no
// knowledge of the sandbox: whoever starts an agent or a gate puts the
// Confiner on the context. done is called once the command has ended.
type Confiner interface {
	Confine(c Cmd) (confined Cmd, done func(), err error)
}

type confinerKey struct{}

// WithConfiner returns ctx whose commands (run by Exec) are confined by cf.
func WithConfiner(ctx context.Context, cf Confiner) context.Context {
	return context.WithValue(ctx, confinerKey{}, cf)
}

// ConfinerOf is the Confiner ctx carries, or nil.
func ConfinerOf(ctx context.Context) Confiner {
	cf, _ := ctx.Value(confinerKey{}).(Confiner)
	return cf
}
