package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"
)

// benchOutput measures how fast ralph consumes an agent's output: 100 MB
// in lines of 100 bytes, through the masking, the parser's tail and the
// capped transcript, against the same stream read by `cat > /dev/null`;
// and ralph's peak memory meanwhile.
func benchOutput(tmp, bin string) {
	const total = 100_000_000
	gen := fmt.Sprintf(`yes "$(printf '%%099d' 0)" | head -c %d`, total)
	dir := filepath.Join(tmp, "output")
	newRepo(dir, map[string]string{
		"prd.json": `{"project":"o","branch_name":"ralph/o","user_stories":[{"id":"S-1","title":"talk","priority":1}]}`,
		"agent.sh": "cat > /dev/null\n" + gen + "\necho '<promise>COMPLETE</promise>'\n",
		"base.sh":  gen + " | cat > /dev/null\n",
	})
	start := time.Now()
	run(dir, nil, "sh", "base.sh")
	base := time.Since(start)

	rss := peakRSS(dir, gitEnv, bin, "run", "--prd", "prd.json", "--agent", "cmd", "--agent-cmd", "sh agent.sh", "--no-gates") / 1024 // KiB → MiB
	var agent time.Duration
	for _, ev := range events(dir) {
		if ev["type"] == "agent_finished" {
			agent = time.Duration(ev["data"].(map[string]any)["duration_ms"].(float64) * float64(time.Millisecond))
		}
	}
	tr, _ := filepathGlob(filepath.Join(dir, ".ralph", "transcripts", "*.log"))
	mbps := func(d time.Duration) float64 { return float64(total) / 1e6 / d.Seconds() }
	fmt.Println("\n## Agent output at disk speed")
	fmt.Printf("\n100 MB in lines of 100 bytes\n\n")
	fmt.Println("| reader | time | rate | goal |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| `cat > /dev/null` (baseline) | %s | %.0f MB/s | |\n", ms(base), mbps(base))
	verdict := "met"
	if mbps(agent) < 300 || rss >= 64 {
		verdict = "NOT met"
	}
	fmt.Printf("| ralph (agent run as it measured it) | %s | %.0f MB/s | ≥ 300 MB/s, peak RSS %d MB < 64 MB: %s |\n", ms(agent), mbps(agent), rss, verdict)
	fmt.Printf("\nTranscript on disk: %s (capped at 50 MB by default).\n", tr)
}

func filepathGlob(pattern string) (string, error) {
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		return "none", err
	}
	out, err := exec.Command("du", "-h", m[0]).Output()
	return string(out[:len(out)-1]), err
}
