// Package e2e holds ralph's end-to-end tests with the real agent CLIs
// (claude, codex, opencode, gemini) and the native agent, each driven by the
// scripted LLM server of internal/llmtest through a whole `ralph run` in a
// temporary git repository. The package has no code outside its tests.
//
// The CLIs are the pinned ones scripts/install-agents.sh installs into
// $RALPH_AGENTS_DIR (default $XDG_CACHE_HOME/ralph/agents, ~/.cache/ralph/agents). A missing CLI skips
// its tests with the reason, unless RALPH_REQUIRE_AGENTS=1, which makes it
// a failure. `go test -short` skips every real-CLI test.
package e2e
