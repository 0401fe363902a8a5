package sandbox

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// Go's build cache in the sandbox: each private home has its own (the
// agent's and the gates' never share one), and both read the user's own
// cache, read-only, before building anything: ralph's binary is the
// go command's GOCACHEPROG (Go 1.24 and later) inside, answering from the
// private cache, then from the user's, and storing what is built in the
// private one. A fresh home so builds as fast as the user's shell does,
// and nothing the agent or a gate runs can change an entry the other (or
// the user) reads.

// GoCacheArg is the hidden first argument that makes ralph's binary a
// GOCACHEPROG: `ralph __gocacheprog READ_ONLY_CACHE`.
const GoCacheArg = "__gocacheprog"

// goUserCache is where the user's Go build cache is shown inside.
const goUserCache = "/run/ralph-go-build"

// userGoCache is the user's Go build cache, when there is one.
func userGoCache() string {
	d := os.Getenv("GOCACHE")
	if d == "" {
		if c, err := os.UserCacheDir(); err == nil {
			d = filepath.Join(c, "go-build")
		}
	}
	if d == "off" || d == "" {
		return ""
	}
	if st, err := os.Stat(filepath.Join(d, "README")); err == nil && st.Mode().IsRegular() {
		return d
	}
	return ""
}

// goCacheRequest and goCacheResponse are the GOCACHEPROG protocol's
// messages (cmd/go/internal/cacheprog).
type goCacheRequest struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type goCacheResponse struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// goCacheMain serves the go command on stdin and stdout: readOnly is
// the user's cache, the private one is where the go command's GOCACHE
// is.
func goCacheMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "ralph gocacheprog: want one argument, the read-only cache")
		return 2
	}
	w := os.Getenv("GOCACHE")
	if w == "" || w == "off" {
		c, err := os.UserCacheDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, "ralph gocacheprog:", err)
			return 1
		}
		w = filepath.Join(c, "go-build")
	}
	c := &goCache{ro: args[0], rw: filepath.Join(w, "ralph-prog")}
	if err := c.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ralph gocacheprog:", err)
		return 1
	}
	return 0
}

type goCache struct {
	ro, rw string
}

func (c *goCache) serve(in io.Reader, out io.Writer) error {
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	dec := json.NewDecoder(bufio.NewReader(in))
	if err := enc.Encode(goCacheResponse{KnownCommands: []string{"get", "put", "close"}}); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	for {
		var req goCacheRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var body []byte
		if req.Command == "put" && req.BodySize > 0 {
			if err := dec.Decode(&body); err != nil {
				return err
			}
		}
		resp := goCacheResponse{ID: req.ID}
		switch req.Command {
		case "get":
			c.get(req.ActionID, &resp)
		case "put":
			p, err := c.put(req.ActionID, req.OutputID, body)
			if err != nil {
				resp.Err = err.Error()
			}
			resp.DiskPath = p
		case "close":
			if err := enc.Encode(resp); err != nil {
				return err
			}
			return bw.Flush()
		default:
			resp.Err = "unknown command " + req.Command
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	}
}

// get answers from the private cache, then the user's.
func (c *goCache) get(action []byte, resp *goCacheResponse) {
	for _, dir := range []string{c.rw, c.ro} {
		out, size, tm, ok := readGoEntry(dir, action)
		if !ok {
			continue
		}
		p := goCacheFile(dir, out, "d")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			// A cached executable: a folder holding it.
			entries, err := os.ReadDir(p)
			if err != nil || len(entries) != 1 {
				continue
			}
			p = filepath.Join(p, entries[0].Name())
		}
		if st, err := os.Stat(p); err != nil || st.Size() != size {
			continue
		}
		resp.OutputID, resp.Size, resp.Time, resp.DiskPath = out, size, &tm, p
		return
	}
	resp.Miss = true
}

// put stores a body in the private cache.
func (c *goCache) put(action, output, body []byte) (string, error) {
	p := goCacheFile(c.rw, output, "d")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if st, err := os.Stat(p); err != nil || st.Size() != int64(len(body)) {
		if err := store.WriteFileNoSync(p, body, 0o644); err != nil {
			return "", err
		}
	}
	entry := fmt.Sprintf("v1 %x %x %20d %20d\n", action, output, len(body), time.Now().UnixNano())
	a := goCacheFile(c.rw, action, "a")
	if err := os.MkdirAll(filepath.Dir(a), 0o755); err != nil {
		return "", err
	}
	return p, store.WriteFileNoSync(a, []byte(entry), 0o644)
}

func goCacheFile(dir string, id []byte, kind string) string {
	h := hex.EncodeToString(id)
	if len(h) < 2 {
		h = "00"
	}
	return filepath.Join(dir, h[:2], h+"-"+kind)
}

// readGoEntry reads an action's entry in a cache folder of the go
// command's layout ("v1 ACTION OUTPUT SIZE TIME").
func readGoEntry(dir string, action []byte) (out []byte, size int64, tm time.Time, ok bool) {
	b, err := os.ReadFile(goCacheFile(dir, action, "a"))
	if err != nil || len(b) > 256 {
		return nil, 0, tm, false
	}
	f := strings.Fields(string(b))
	if len(f) != 5 || f[0] != "v1" || f[1] != hex.EncodeToString(action) {
		return nil, 0, tm, false
	}
	out, err = hex.DecodeString(f[2])
	if err != nil {
		return nil, 0, tm, false
	}
	size, err1 := strconv.ParseInt(f[3], 10, 64)
	nanos, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || size < 0 {
		return nil, 0, tm, false
	}
	return out, size, time.Unix(0, nanos), true
}
