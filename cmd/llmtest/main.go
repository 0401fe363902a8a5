// Command llmtest serves a scripted LLM (Anthropic Messages, OpenAI Responses
// and Chat Completions, Gemini) for end-to-end tests of agent CLIs.
//
//	llmtest -script FILE [-log FILE] [-addr 127.0.0.1:0]
//
// The first line on stdout is LLMTEST_URL=http://HOST:PORT; the server runs
// until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ralph-loop/ralph/internal/llmtest"
)

func main() {
	scriptPath := flag.String("script", "", "script file (JSON, or YAML by extension)")
	logPath := flag.String("log", "", "append one JSON line per request to this file")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	if err := run(*scriptPath, *logPath, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "llmtest:", err)
		os.Exit(1)
	}
}

func run(scriptPath, logPath, addr string) error {
	if scriptPath == "" {
		return fmt.Errorf("-script is required")
	}
	script, err := llmtest.LoadScript(scriptPath)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	srv, err := llmtest.StartAddr(addr, script, logPath)
	if err != nil {
		return err
	}
	fmt.Printf("LLMTEST_URL=%s\n", srv.URL())
	_ = os.Stdout.Sync()
	<-sigs
	return srv.Close()
}
