// Command ralph runs AI coding agents in a verified Ralph loop.
package main

import (
	"os"

	"github.com/ralph-loop/ralph/internal/cli"
	_ "github.com/ralph-loop/ralph/internal/early" // before everything else: see its doc
)

func main() { os.Exit(cli.Main()) }
