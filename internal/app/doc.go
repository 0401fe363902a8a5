// Package app is ralph's composition root: it opens a run from plain
// options (the source, the agents in the sandbox, the judge, the
// notifications, the engine's Config) and starts it. The CLI fills the
// options from its flags and config and hands in what it owns (the
// process runner, the gate runner, the output streams) explicitly; app
// imports neither the CLI nor cobra.
package app
