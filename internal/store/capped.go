package store

import (
	"fmt"
	"io"
	"os"
)

// CappedFile is a log file that never grows beyond about max bytes: the
// first max/2 bytes go to the file as they come; after that the newest
// max/2 bytes are kept in a ring in a side file (<path>.tail), and Close
// appends a marker saying how much of the middle was dropped, then the
// tail in order. Memory use is constant whatever is written. A crash
// leaves the head in the file and the newest bytes in the side file.
type CappedFile struct {
	f        *os.File
	path     string
	head     int64 // bytes the file takes before the ring starts
	ring     int64 // size of the tail ring
	written  int64 // bytes written in all
	tail     *os.File
	next     int64 // where the next tail byte goes in the ring
	ringFull bool
}

// OpenCapped opens path for appending (owner-only) with a cap of max
// bytes; max <= 0 means no cap.
func OpenCapped(path string, max int64) (*CappedFile, error) {
	f, err := OpenOwn(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	c := &CappedFile{f: f, path: path}
	if max > 0 {
		c.head, c.ring = max/2, max-max/2
	}
	if st, err := f.Stat(); err == nil {
		c.written = st.Size() // a transcript reopened to add to it
	}
	return c, nil
}

func (c *CappedFile) Write(b []byte) (int, error) {
	n := len(b)
	if c.ring == 0 || c.written+int64(len(b)) <= c.head {
		c.written += int64(len(b))
		_, err := c.f.Write(b)
		return n, err
	}
	if room := c.head - c.written; room > 0 {
		if _, err := c.f.Write(b[:room]); err != nil {
			return 0, err
		}
		c.written += room
		b = b[room:]
	}
	if c.tail == nil {
		t, err := OpenOwn(c.path+".tail", os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
		if err != nil {
			return 0, err
		}
		c.tail = t
	}
	c.written += int64(len(b))
	if int64(len(b)) > c.ring {
		b = b[int64(len(b))-c.ring:]
	}
	for len(b) > 0 {
		k := min(int64(len(b)), c.ring-c.next)
		if _, err := c.tail.WriteAt(b[:k], c.next); err != nil {
			return 0, err
		}
		b = b[k:]
		c.next += k
		if c.next == c.ring {
			c.next, c.ringFull = 0, true
		}
	}
	return n, nil
}

// Dropped is how many bytes the cap has dropped so far.
func (c *CappedFile) Dropped() int64 {
	if c.ring == 0 || c.written <= c.head+c.ring {
		return 0
	}
	return c.written - c.head - c.ring
}

// Close writes the marker and the tail in order, removes the side file,
// and closes the log.
func (c *CappedFile) Close() error {
	if c.tail == nil {
		return c.f.Close()
	}
	var err error
	if d := c.Dropped(); d > 0 {
		_, err = fmt.Fprintf(c.f, "\n[ralph: %d bytes of output dropped here (transcript_max_bytes %d): the first %d and the last %d bytes are kept]\n", d, c.head+c.ring, c.head, c.ring)
	}
	if err == nil {
		if c.ringFull {
			_, err = io.Copy(c.f, io.NewSectionReader(c.tail, c.next, c.ring-c.next))
		}
		if err == nil {
			_, err = io.Copy(c.f, io.NewSectionReader(c.tail, 0, c.next))
		}
	}
	c.tail.Close()
	if err == nil {
		_ = os.Remove(c.path + ".tail")
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}
