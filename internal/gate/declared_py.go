package gate

import (
	"regexp"
	"strings"
)

var (
	pyDef   = regexp.MustCompile(`^(\s*)(?:async\s+)?def\s+(\w+)\s*\(`)
	pyClass = regexp.MustCompile(`^(\s*)class\s+(\w+)\s*(?:\((.*?)\)?)?\s*:`)
	pyDeco  = regexp.MustCompile(`^\s*@\s*([\w.]+)`)
)

// pyScope is a class or function whose body is open.
type pyScope struct {
	indent int
	name   string
	class  bool
	test   bool // a class whose test* methods are tests
	mark   string
}

// declaredPython lists the tests a Python file declares, as pytest and
// unittest collect them (see Declared), and the test classes that may
// inherit tests from a base it did not see.
func declaredPython(file string, src []byte) (tests []DeclaredTest, open []string) {
	var scopes []pyScope
	var decos []string
	testClasses := map[string]bool{}
	quote := "" // the triple quote of an open string
	for n, line := range strings.Split(string(src), "\n") {
		if quote != "" {
			if strings.Count(line, quote)%2 == 1 {
				quote = ""
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(line, q)%2 == 1 {
				quote = q
			}
		}
		ind := len(line) - len(strings.TrimLeft(line, " \t"))
		for len(scopes) > 0 && scopes[len(scopes)-1].indent >= ind {
			scopes = scopes[:len(scopes)-1]
		}
		if m := pyDeco.FindStringSubmatch(line); m != nil {
			decos = append(decos, m[1])
			continue
		}
		mark := pyMarks(decos)
		decos = nil
		inClass := len(scopes) > 0 && scopes[len(scopes)-1].class
		allTest := true
		var path []string
		for _, s := range scopes {
			allTest = allTest && s.class && s.test
			path = append(path, s.name)
			if mark == "" {
				mark = s.mark
			}
		}
		if m := pyClass.FindStringSubmatch(line); m != nil {
			bases := pyBases(m[3])
			test := strings.HasPrefix(m[2], "Test")
			inherits := false
			for _, b := range bases {
				last := b[strings.LastIndex(b, ".")+1:]
				switch {
				case strings.HasSuffix(last, "TestCase"), testClasses[b]:
					test = true
				case b != "object" && !strings.HasPrefix(b, "metaclass"):
					inherits = true
				}
			}
			test = test && allTest
			if test {
				testClasses[m[2]] = true
				if inherits {
					open = append(open, strings.Join(append(path, m[2]), "::"))
				}
			}
			scopes = append(scopes, pyScope{indent: ind, name: m[2], class: true, test: test, mark: mark})
			continue
		}
		m := pyDef.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if strings.HasPrefix(m[2], "test") && allTest && (len(scopes) == 0 || inClass) {
			name := strings.Join(append(path, m[2]), "::")
			tests = append(tests, DeclaredTest{File: file, Line: n + 1, Lang: "python", Name: name, Mark: mark})
		}
		scopes = append(scopes, pyScope{indent: ind, name: m[2]})
	}
	return tests, open
}

// pyBases splits a class's bases, dropping keyword arguments.
func pyBases(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		if b != "" && !strings.Contains(b, "=") {
			out = append(out, b)
		}
	}
	return out
}

// pyMarks reads a definition's decorators: skipped, expected to fail.
func pyMarks(decos []string) (mark string) {
	for _, d := range decos {
		last := d[strings.LastIndex(d, ".")+1:]
		switch last {
		case "skip", "skipIf", "skipUnless", "skipif":
			mark = "skip"
		case "expectedFailure", "xfail":
			if mark == "" {
				mark = "xfail"
			}
		}
	}
	return mark
}
