package tasks

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRememberedSetMatchesParse: after every Update the Set Load hands out
// without parsing (the one the Update wrote) is record for record what a
// parse of the written files makes, over random claims, completions,
// blocks, splits and additions on a tree with hand-written lines (extra
// fields, a missing "leaf", odd spacing) and an archive.
func TestRememberedSetMatchesParse(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := newStore(t,
				"{\"id\":\"A\",\"title\":\"a\",\"status\":\"pending\",\"leaf\":false}\n"+
					"{\"id\":\"A.1\",  \"title\":\"a1\", \"status\":\"pending\", \"owner\":\"me\"}\n"+
					"{\"id\":\"A.2\",\"title\":\"a2\",\"status\":\"pending\",\"leaf\":true,\"agent\":\"codex\"}\n"+
					"\n"+
					"{\"id\":\"B\",\"title\":\"b\",\"status\":\"pending\",\"leaf\":true}\n",
				"{\"id\":\"Z\",\"title\":\"z\",\"status\":\"complete\",\"leaf\":true,\"commit\":\"c0\"}\n")
			next := 0
			for step := 0; step < 40; step++ {
				snap := mustLoad(t, s)
				var open []string
				for _, tk := range snap.List("") {
					if !tk.Archived() {
						open = append(open, tk.ID)
					}
				}
				err := s.Update(func(set *Set) error {
					if len(open) == 0 || rng.IntN(5) == 0 {
						next++
						_, err := set.Add(fmt.Sprintf("N%d", next), fmt.Sprintf("new %d", next), "")
						return err
					}
					id := open[rng.IntN(len(open))]
					tk, _ := set.Get(id)
					switch rng.IntN(4) {
					case 0:
						if tk.Leaf && tk.Status == StatusPending {
							_, err := set.Claim(id)
							return err
						}
					case 1:
						if tk.Leaf && tk.Status != StatusBlocked {
							_, err := set.Complete(id, fmt.Sprintf("c%d", step), now)
							return err
						}
					case 2:
						if tk.Status != StatusComplete {
							return set.Block(id, "stuck")
						}
					case 3:
						if tk.Leaf && tk.Status == StatusPending {
							_, err := set.Split(id, []string{"x", "y"})
							return err
						}
					}
					tk.Title += "!"
					return nil
				})
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				written := s.cache
				got, err := s.Load()
				if err != nil {
					t.Fatal(err)
				}
				if written != nil && got != written.set {
					t.Fatalf("step %d: Load parsed the files the Update had just written", step)
				}
				data, done, _ := s.ReadBoth()
				want, err := s.parse(data, done)
				if err != nil {
					t.Fatal(err)
				}
				if d := diffSets(got, want); d != "" {
					t.Fatalf("step %d: the remembered Set differs from a parse: %s", step, d)
				}
			}
		})
	}
}

// diffSets compares two Sets record for record, then task for task.
func diffSets(a, b *Set) string {
	if len(a.warnings) != len(b.warnings) || a.changed != b.changed || len(a.shadowed) != len(b.shadowed) {
		return fmt.Sprintf("warnings %q/%q changed %v/%v shadowed %d/%d", a.warnings, b.warnings, a.changed, b.changed, len(a.shadowed), len(b.shadowed))
	}
	if !a.indexed || !b.indexed || !slices.Equal(a.notPending, b.notPending) || a.pendingLeaves != b.pendingLeaves {
		return fmt.Sprintf("index: %v %v %d, a parse has %v %v %d", a.indexed, a.notPending, a.pendingLeaves, b.indexed, b.notPending, b.pendingLeaves)
	}
	for _, l := range []struct {
		name string
		x, y []entry
	}{{"active", a.active, b.active}, {"done", a.done, b.done}} {
		if len(l.x) != len(l.y) {
			return fmt.Sprintf("%s: %d records, a parse has %d", l.name, len(l.x), len(l.y))
		}
		for i := range l.x {
			x, y := &l.x[i], &l.y[i]
			if a.id(x) != b.id(y) || string(a.raw(x)) != string(b.raw(y)) || x.status != y.status || x.line != y.line || x.leaf != y.leaf || x.flags != y.flags {
				return fmt.Sprintf("%s record %d: %s %q %+v, a parse has %s %q %+v", l.name, i, a.id(x), a.raw(x), *x, b.id(y), b.raw(y), *y)
			}
			tx, ty := a.task(x), b.task(y)
			if tx.core() != ty.core() || tx.line != ty.line || tx.flags != ty.flags || tx.dirty() || ty.dirty() || !slices.Equal(tx.raw, ty.raw) {
				return fmt.Sprintf("%s task %s: %+v, a parse has %+v", l.name, a.id(x), tx, ty)
			}
		}
	}
	return ""
}
