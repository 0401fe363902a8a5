package agent

import (
	"strings"
	"testing"
)

func TestAmpPlan(t *testing.T) {
	a := &amp{cliBase: newCLIBase(ampCLI, Options{Command: []string{"amp"}})}
	a.BaseURL = ""
	inv, err := a.Plan(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Argv, " "); got != "amp --dangerously-allow-all -x" || !inv.PromptStdin || len(inv.Env) != 0 {
		t.Errorf("inv = %+v", inv)
	}
}

func feedAmp(out string, exit int, stderr string) Result {
	p := &ampParser{}
	for _, l := range strings.Split(out, "\n") {
		p.Line([]byte(l))
	}
	res := Result{ExitCode: exit}
	p.Finish(&res, stderr)
	return res
}

func TestAmpParser(t *testing.T) {
	res := feedAmp("I'll create the file.\n\nCreated hello.txt.\n\ndone <promise>COMPLETE</promise>\n", 0, "")
	if res.FinalText != "done <promise>COMPLETE</promise>" || res.IsError {
		t.Fatalf("res = %+v", res)
	}
	// What this amp version prints when it cannot reach its server.
	res = feedAmp("", 1, "Error: Couldn't connect to the Amp server at http://127.0.0.1:1.\n\nRun `pnpm dev` to start the local server, then try again.\n")
	if !res.IsError || res.RateLimit != nil || !strings.Contains(res.ErrorText, "Amp server") {
		t.Fatalf("res = %+v", res)
	}
	res = feedAmp("Error: rate limit exceeded, try again in 30 seconds\n", 1, "")
	if res.RateLimit == nil || res.RateLimit.ResetAt.IsZero() {
		t.Fatalf("rate limit = %+v", res.RateLimit)
	}
}
