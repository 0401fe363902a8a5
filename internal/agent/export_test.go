package agent

// cli lets a test reach the CLI adapter's settings behind the Agent
// interface (the real-CLI tests turn the CLIs' own retries off).
func (b *cliBase) cli() *cliBase { return b }
