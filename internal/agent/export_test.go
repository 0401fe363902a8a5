package agent

import "time"

// cli lets a test reach the CLI adapter's settings behind the Agent
// interface (the real-CLI tests turn the CLIs' own retries off).
func (b *cliBase) cli() *cliBase { return b }

// SetVersionTimeout shortens the preflight's --version bound for a test.
func SetVersionTimeout(d time.Duration) func() {
	old := versionTimeout
	versionTimeout = d
	return func() { versionTimeout = old }
}
