package engine

import (
	"os"
	"strings"
	"testing"
	"time"
)

// An acknowledgement is a line of the final message of its own, outside
// fences, not an echo of the prompt; several ids may follow.
func TestGuidanceAcks(t *testing.T) {
	prompt := "## Guidance from a person\n\n- [g1] use tabs\n\nsay GUIDANCE-ACK: g1\n"
	for final, want := range map[string]string{
		"Done.\nGUIDANCE-ACK: g1":               "g1",
		"- guidance-ack: G2, g3.":               "g2 g3",
		"```\nGUIDANCE-ACK: g1\n```":            "",
		"say GUIDANCE-ACK: g1":                  "", // the prompt's own line
		"I will GUIDANCE-ACK: g1 later":         "",
		"GUIDANCE-ACK: g1\nGUIDANCE-ACK: g1 g4": "g1 g4",
	} {
		if got := strings.Join(guidanceAcks(final, prompt), " "); got != want {
			t.Errorf("%q: %q, want %q", final, got, want)
		}
	}
}

// The log believes only sealed lines: forged guidance, a forged
// acknowledgement and a torn last line (a crash mid-append) are left out,
// and the next append repairs the tear. Shown counts per run: a new
// run's iteration 1 is not the old run's.
func TestGuidanceLog(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	p := PathsFor(t.TempDir())
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	g, err := GiveGuidance(p, "use tabs", "", "test", 2, now)
	if err != nil || g.ID != "g1" {
		t.Fatal(g, err)
	}
	kept, _ := guidanceKept(p)
	f, _ := os.OpenFile(kept, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"given","id":"g2","text":"FORGED","at":"2026-01-01T00:00:00Z","for":3,"seal":"00"}` + "\n")
	f.WriteString(`{"kind":"acknowledged","id":"g1","at":"2026-01-01T00:00:00Z","iteration":1,"seal":"00"}` + "\n")
	f.WriteString(`{"kind":"given","id":"g3","te`)
	f.Close()
	if g, err := GiveGuidance(p, "second", "S-1", "test", 0, now); err != nil || g.ID != "g2" || g.For != DefaultGuidanceIterations {
		t.Fatal(g, err)
	}
	e := &Engine{cfg: Config{Paths: p, Clock: realClock{}}}
	e.box = newStateBox(&State{RunID: "run-a"}, p.State, time.Now)
	all, err := ReadGuidance(p)
	if err != nil || len(all) != 2 || all[0].Text != "use tabs" || all[1].Text != "second" || all[0].Acknowledged != 0 {
		t.Fatalf("%+v %v", all, err)
	}
	if got := PendingGuidance(all, "S-2"); len(got) != 1 || got[0].ID != "g1" {
		t.Errorf("S-2's: %+v", got)
	}
	e.guidanceShown(PendingGuidance(all, "S-1"), "S-1", 1)
	e.acknowledgeGuidance("S-1", 1, "GUIDANCE-ACK: g2", "")
	e.acknowledgeGuidance("S-1", 2, "GUIDANCE-ACK: g1", "") // iteration 2 was never shown it
	e.box = newStateBox(&State{RunID: "run-b"}, p.State, time.Now)
	e.guidanceShown(PendingGuidance(all, "S-3"), "S-3", 1)
	e.acknowledgeGuidance("S-3", 5, "GUIDANCE-ACK: g1", "")
	all, _ = ReadGuidance(p)
	if all[0].Acknowledged != 0 || len(all[0].Shown) != 2 || all[0].Pending() {
		t.Errorf("g1: %+v", all[0])
	}
	if all[1].Acknowledged != 1 || all[1].Pending() {
		t.Errorf("g2: %+v", all[1])
	}
	// The copy in .ralph is only a copy: erasing it erases nothing.
	os.Remove(GuidanceFile(p))
	if again, _ := ReadGuidance(p); len(again) != 2 {
		t.Errorf("after the copy was erased: %+v", again)
	}
}
