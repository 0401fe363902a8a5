package source

import (
	"context"
	"testing"
	"time"
)

// A story waits for the story ahead of it while that one is judged and on
// its way to merge, and goes once it left the queue; a story ahead that
// passed but never comes to merge holds it back holdUp at most; a story
// outside the queue never waits.
func TestSpecQueueWaitTurn(t *testing.T) {
	q := newSpecQueue()
	q.entries = []*queued{{id: "A", judged: "ca", tree: "ta", parent: "tip"}, {id: "B", judged: "cb", tree: "tb", parent: "ca"}}
	q.pass("B")
	went := make(chan struct{})
	go func() {
		q.waitTurn(context.Background(), "B")
		close(went)
	}()
	select {
	case <-went:
		t.Fatal("B went while A was being judged")
	case <-time.After(50 * time.Millisecond):
	}
	q.pass("A")
	q.waitTurn(context.Background(), "A") // nothing ahead: at once; A is on its way
	select {
	case <-went:
		t.Fatal("B went while A was on its way to merge")
	case <-time.After(50 * time.Millisecond):
	}
	a := q.leave("A")
	if !q.fits(a, "ta", "tip") || q.fits(a, "other", "tip") || q.fits(a, "ta", "elsewhere") {
		t.Fatal("A fits only its own tree on the tip it was judged on")
	}
	<-went
	b := q.leave("B")
	if q.fits(b, "tb", "landedA") {
		t.Fatal("B fits before A's judged commit landed")
	}
	q.land(a, "landedA")
	if !q.fits(b, "tb", "landedA") {
		t.Fatal("B does not fit on the commit A's judged tree landed as")
	}

	// Outside the queue: no wait.
	q.entries = []*queued{{id: "C", judged: "cc"}}
	done := make(chan struct{})
	go func() { q.waitTurn(context.Background(), "X"); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("a story outside the queue waited")
	}
	// A story ahead that passed but does not come: holdUp at most, and
	// nothing more is built on it.
	q.entries = []*queued{{id: "C", judged: "cc"}, {id: "D", judged: "cd"}}
	q.pass("C")
	q.entries[0].since = time.Now().Add(-holdUp + 100*time.Millisecond)
	start := time.Now()
	q.waitTurn(context.Background(), "D")
	if d := time.Since(start); d < 50*time.Millisecond || d > holdUp {
		t.Fatalf("D waited %s for a held story ahead", d)
	}
	q.entries[0].since = time.Now().Add(-holdUp)
	q.mu.Lock()
	end := q.end("tip")
	q.mu.Unlock()
	if end != "cd" || q.find("C") != nil {
		t.Fatalf("the queue still builds on a held story: end %s", end)
	}
}
