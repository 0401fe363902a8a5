package engine

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// Concurrent updates each return after a write that holds them, and the
// file ends equal to the state in memory.
func TestStateBoxConcurrentUpdates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	b := newStateBox(&State{RunID: "r", Source: "prd", Items: map[string]*ItemState{}}, path, time.Now)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("w%d", w)
				update := b.update
				if i%5 == 0 {
					update = b.updateDurable
				}
				if err := update(func(st *State) { st.Item(id).Runs++ }); err != nil {
					t.Error(err)
					return
				}
				// What this update changed is on disk once it returns.
				st, err := LoadState(path)
				if err != nil || st.Items[id] == nil || st.Items[id].Runs < i+1 {
					t.Errorf("after update %d of %s the file holds %+v (%v)", i+1, id, st.Items[id], err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st)
	want, _ := json.Marshal(b.snapshot())
	if string(got) != string(want) {
		t.Fatalf("the file differs from the state in memory:\n got %s\nwant %s", got, want)
	}
}

// A snapshot shares nothing with the state: every pointer, slice and map
// of a state with every field set is a copy of its own, so a field added
// later that Clone forgets to copy fails here.
func TestCloneSharesNothing(t *testing.T) {
	st := &State{}
	fill(reflect.ValueOf(st).Elem())
	if len(st.Items) == 0 || len(st.Current) == 0 || st.Items[""].Usage == nil {
		t.Fatal("fill left fields empty")
	}
	c := st.Clone()
	if !reflect.DeepEqual(st, c) {
		t.Fatal("the clone differs from the state")
	}
	if path := shared(reflect.ValueOf(st), reflect.ValueOf(c), "State"); path != "" {
		t.Fatalf("the clone shares %s with the state", path)
	}
}

var timeType = reflect.TypeOf(time.Time{})

// fill sets every exported field of v, recursively, to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1)
	default:
		panic("fill: " + v.Type().String())
	}
}

// shared returns the path of the first pointer, slice or map that a and b
// share ("" when none).
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := 0; i < min(a.Len(), b.Len()); i++ {
			if p := shared(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				if p := shared(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k)); p != "" {
					return p
				}
			}
		}
	case reflect.Struct:
		if a.Type() == timeType {
			return "" // a value; its location is shared by design
		}
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).IsExported() {
				if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
	}
	return ""
}
