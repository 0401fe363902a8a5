package gate

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// junitSuite is a <testsuites> or <testsuite> element: the two nest in
// every combination the JUnit writers of pytest, jest-junit, vitest,
// gotestsum and others produce.
type junitSuite struct {
	Suites []junitSuite `xml:"testsuite"`
	Cases  []junitCase  `xml:"testcase"`
}

type junitCase struct {
	Name      string     `xml:"name,attr"`
	Classname string     `xml:"classname,attr"`
	Failures  []struct{} `xml:"failure"`
	Errors    []struct{} `xml:"error"`
	Skipped   []struct {
		Type string `xml:"type,attr"`
	} `xml:"skipped"`
}

// readJUnit reads a JUnit XML report: each testcase is a test named
// "classname::name" (or its name alone when it has no class or already
// starts with it, as jest-junit writes it), failed when it holds a
// failure or error, skipped when it holds skipped (an expected failure
// when that is pytest's xfail).
func readJUnit(r io.Reader) (*Tests, error) {
	var root junitSuite
	if err := xml.NewDecoder(r).Decode(&root); err != nil {
		return nil, err
	}
	t := perTest("junit")
	var walk func(s junitSuite)
	walk = func(s junitSuite) {
		for _, c := range s.Cases {
			name := c.Name
			if c.Classname != "" && !strings.HasPrefix(name, c.Classname) {
				name = c.Classname + "::" + name
			}
			o := Pass
			switch {
			case len(c.Failures) > 0 || len(c.Errors) > 0:
				o = Fail
			case len(c.Skipped) > 0 && c.Skipped[0].Type == "pytest.xfail":
				o = XFail
			case len(c.Skipped) > 0:
				o = Skip
			}
			t.add(name, o)
		}
		for _, sub := range s.Suites {
			walk(sub)
		}
	}
	walk(root)
	return t.count(), nil
}

// maxReport bounds a report file ralph reads.
const maxReport = 64 << 20

// readReports reads the JUnit reports a gate wrote: the files in dir
// matching pattern (filepath.Match syntax, relative to dir) that were
// written since the gate started — a report left from an earlier run, or
// committed, is not this run's. It never leaves dir (a symbolic link out
// of it is not followed) and reads only regular files. notes say what
// was not read. nil when no report was read.
func readReports(dir, pattern string, since time.Time) (*Tests, []string) {
	if !filepath.IsLocal(pattern) {
		return nil, []string{fmt.Sprintf("report %q is not a path inside the work tree", pattern)}
	}
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, []string{fmt.Sprintf("report %q: %v", pattern, err)}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, []string{err.Error()}
	}
	defer root.Close()
	// A file system may keep whole seconds: a report written in the
	// gate's first second must count.
	since = since.Truncate(time.Second)
	var all *Tests
	var notes []string
	for _, m := range matches {
		rel, err := filepath.Rel(dir, m)
		if err != nil {
			continue
		}
		t, err := readReport(root, rel, since)
		switch {
		case errors.Is(err, errStale):
		case err != nil:
			notes = append(notes, fmt.Sprintf("report %s not read: %v", rel, err))
		case all == nil:
			all = t
		default:
			all.include(t)
		}
	}
	return all, notes
}

var errStale = errors.New("written before the gate started")

func readReport(root *os.Root, rel string, since time.Time) (*Tests, error) {
	// O_NONBLOCK: a named pipe in its place must not hang ralph.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	case fi.ModTime().Before(since):
		return nil, errStale
	}
	return readJUnit(io.LimitReader(f, maxReport))
}
