// Command ralph runs AI coding agents in a verified Ralph loop.
package main

import (
	"os"

	"github.com/ralph-loop/ralph/internal/cli"
)

func main() { os.Exit(cli.Main()) }
