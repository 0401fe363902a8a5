package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// A capped log keeps the first half and the newest half of the cap, with a
// marker naming what was dropped, whatever the sizes of the writes; under
// the cap it is the output as written.
func TestCappedFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ max, total int }{{100, 50}, {100, 100}, {100, 101}, {100, 1000}, {1 << 10, 1 << 16}, {7, 500}} {
		path := filepath.Join(t.TempDir(), "t.log")
		f, err := OpenCapped(path, int64(c.max))
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		for len(all) < c.total {
			b := make([]byte, min(rng.IntN(3*c.max/2+1)+1, c.total-len(all)))
			for i := range b {
				b[i] = byte('a' + rng.IntN(26))
			}
			if n, err := f.Write(b); err != nil || n != len(b) {
				t.Fatal(n, err)
			}
			all = append(all, b...)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		want := all
		if len(all) > c.max {
			head, ring := c.max/2, c.max-c.max/2
			marker := fmt.Sprintf("\n[ralph: %d bytes of output dropped here (transcript_max_bytes %d): the first %d and the last %d bytes are kept]\n", len(all)-c.max, c.max, head, ring)
			want = append(append(append([]byte{}, all[:head]...), marker...), all[len(all)-ring:]...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("max %d, %d bytes written:\n got %q\nwant %q", c.max, c.total, got, want)
		}
		if _, err := os.Stat(path + ".tail"); !os.IsNotExist(err) {
			t.Fatalf("side file left: %v", err)
		}
	}
}
