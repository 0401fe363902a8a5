package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// firstBuildGoal is what a newcomer's first `go run ./cmd/ralph demo`
// may take once the modules are downloaded: the build from an empty build
// cache and the demo.
const firstBuildGoal = 45 * time.Second

// benchFirstBuild times `go build ./cmd/ralph` from an empty build cache
// (the module cache as it is: downloads are the network's, not ralph's)
// and the demo it builds, as `go run ./cmd/ralph demo` builds it (no build
// tags), beside the same with the natsserver tag (the coordinator's
// embedded NATS server, which release binaries and `make build` have).
func benchFirstBuild(tmp string) {
	fmt.Println("\n## First build: `go run ./cmd/ralph demo` from an empty build cache (modules already downloaded)")
	fmt.Println()
	fmt.Println("| build | cold build | the demo | together | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, tags := range []string{"", "natsserver"} {
		name := "go run (no tags)"
		if tags != "" {
			name = "-tags " + tags
		}
		cache := filepath.Join(tmp, "gocache-"+name[:2])
		bin := filepath.Join(tmp, "ralph-first-"+name[:2])
		check(os.RemoveAll(cache))
		// GOFLAGS without the Makefile's tag: the build is exactly this one.
		env := []string{"GOCACHE=" + cache, "GOFLAGS=-buildvcs=false"}
		argv := []string{"go", "build", "-o", bin}
		if tags != "" {
			argv = append(argv, "-tags", tags)
		}
		start := time.Now()
		run("", env, append(argv, "./cmd/ralph")...)
		build := time.Since(start)
		start = time.Now()
		run(tmp, nil, bin, "demo")
		demo := time.Since(start)
		verdict := "≤ " + secs3(firstBuildGoal) + " met"
		if build+demo > firstBuildGoal {
			verdict = "≤ " + secs3(firstBuildGoal) + " NOT met"
		}
		if tags != "" {
			verdict = "(for comparison)"
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", name, secs3(build), secs3(demo), secs3(build+demo), verdict)
		check(os.RemoveAll(cache))
	}
}
