package gate

import (
	"slices"
	"strings"
)

// jsToken is a token of a JavaScript or TypeScript file, as far as
// finding test calls needs: identifiers, string literals (text: their
// value; dynamic: a template with ${…}), and single punctuation.
type jsToken struct {
	kind    byte // 'i' identifier, 's' string, 'p' punctuation, 'n' other (number, regexp)
	text    string
	dynamic bool
	line    int
}

// jsTokens splits src, dropping comments, numbers' values, regular
// expressions and whitespace.
func jsTokens(src string) []jsToken {
	var toks []jsToken
	line := 1
	regexOK := true // a '/' here starts a regular expression
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				end = len(src) - i - 2
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
		case c == '\'' || c == '"' || c == '`':
			start := line
			text, dyn, n, lines := jsString(src[i:])
			toks = append(toks, jsToken{kind: 's', text: text, dynamic: dyn, line: start})
			line += lines
			i += n
			regexOK = false
		case c == '/' && regexOK:
			j := i + 1
			class := false
			for j < len(src) && src[j] != '\n' {
				if src[j] == '\\' {
					j += 2
					continue
				}
				if src[j] == '[' {
					class = true
				} else if src[j] == ']' {
					class = false
				} else if src[j] == '/' && !class {
					break
				}
				j++
			}
			j++
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			toks = append(toks, jsToken{kind: 'n', line: line})
			i = min(j, len(src))
			regexOK = false
		case isIdentByte(c):
			j := i
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			word := src[i:j]
			kind := byte('i')
			if c >= '0' && c <= '9' {
				kind = 'n'
			}
			toks = append(toks, jsToken{kind: kind, text: word, line: line})
			regexOK = kind == 'i' && slices.Contains([]string{"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw", "yield", "await"}, word)
			i = j
		default:
			toks = append(toks, jsToken{kind: 'p', text: string(c), line: line})
			regexOK = c != ')' && c != ']' && c != '}'
			i++
		}
	}
	return toks
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// jsString reads the string literal s starts with: its value (escapes
// read), whether it is a template with ${…}, its length and the lines it
// spans.
func jsString(s string) (text string, dynamic bool, n, lines int) {
	q := s[0]
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == q:
			return b.String(), dynamic, i + 1, lines
		case c == '\n':
			lines++
			if q != '`' {
				return b.String(), dynamic, i, lines - 1 // an unterminated string ends at the line
			}
			b.WriteByte(c)
			i++
		case c == '\\' && i+1 < len(s):
			switch e := s[i+1]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\n':
				lines++
			default:
				b.WriteByte(e)
			}
			i += 2
		case q == '`' && c == '$' && i+1 < len(s) && s[i+1] == '{':
			dynamic = true
			depth := 0
			for i < len(s) {
				if s[i] == '{' {
					depth++
				} else if s[i] == '}' {
					depth--
					if depth == 0 {
						break
					}
				} else if s[i] == '\n' {
					lines++
				}
				i++
			}
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), dynamic, len(s), lines
}

// The functions that declare suites and tests in jest, vitest, mocha and
// node:test, and the mark each alias carries.
var (
	jsSuiteFuncs = map[string]string{"describe": "", "context": "", "suite": "", "xdescribe": "skip", "xcontext": "skip", "fdescribe": "only"}
	jsTestFuncs  = map[string]string{"it": "", "test": "", "specify": "", "xit": "skip", "xtest": "skip", "xspecify": "skip", "fit": "only"}
	jsModifiers  = map[string]string{"skip": "skip", "todo": "todo", "only": "only", "failing": "xfail", "fails": "xfail",
		"each": "", "concurrent": "", "sequential": "", "serial": "", "skipIf": "", "runIf": "", "for": "", "extend": ""}
)

// jsFrame is a describe or test whose call's parentheses are open.
type jsFrame struct {
	depth   int // paren depth inside its call
	title   string
	suite   bool
	dynamic bool
	mark    string
	context string // a test's context parameter (node:test's t)
}

// declaredJS lists the suites and tests a JavaScript or TypeScript file
// declares (see Declared for what it does not see).
func declaredJS(file string, src []byte) []DeclaredTest {
	toks := jsTokens(string(src))
	var tests []DeclaredTest
	var frames []jsFrame
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == 'p' {
			switch t.text {
			case "(":
				depth++
			case ")":
				for len(frames) > 0 && frames[len(frames)-1].depth >= depth {
					frames = frames[:len(frames)-1]
				}
				depth--
			}
			continue
		}
		if t.kind != 'i' {
			continue
		}
		suiteMark, isSuite := jsSuiteFuncs[t.text]
		testMark, isTest := jsTestFuncs[t.text]
		subtest := false
		if i > 0 && toks[i-1].text == "." {
			// t.test('name', …) inside a test whose context is t.
			if !(t.text == "test" && i > 1 && toks[i-2].kind == 'i' && jsInTestWithContext(frames, toks[i-2].text)) {
				continue
			}
			subtest, isTest, isSuite, testMark = true, true, false, ""
		}
		if !isSuite && !isTest {
			continue
		}
		mark := suiteMark
		if isTest {
			mark = testMark
		}
		dynamic := false
		j := i + 1
		for j+1 < len(toks) && toks[j].text == "." && toks[j+1].kind == 'i' {
			m, ok := jsModifiers[toks[j+1].text]
			if !ok {
				break
			}
			if m != "" {
				mark = m
			}
			if toks[j+1].text == "each" || toks[j+1].text == "for" {
				dynamic = true
			}
			j += 2
			// test.each(table)(…), test.skipIf(cond)(…), test.each`table`(…)
			if j < len(toks) && toks[j].kind == 's' {
				j++
			} else if j < len(toks) && toks[j].text == "(" && toks[j-1].text != "skip" && toks[j-1].text != "only" && toks[j-1].text != "todo" {
				if k := jsClose(toks, j); k > j && k+1 < len(toks) && toks[k+1].text == "(" {
					j = k + 1
				}
			}
		}
		if j >= len(toks) || toks[j].text != "(" {
			continue
		}
		if subtest && mark != "" {
			continue
		}
		title := ""
		k := j + 1
		if k < len(toks) && toks[k].kind == 's' && k+1 < len(toks) && (toks[k+1].text == "," || toks[k+1].text == ")") {
			title = toks[k].text
			dynamic = dynamic || toks[k].dynamic
		} else {
			dynamic = true
		}
		opts, context := jsCallback(toks, k+1)
		if opts != "" && mark == "" {
			mark = opts
		}
		var parents []string
		parentDynamic := false
		for _, f := range frames {
			if f.title != "" || !f.dynamic {
				parents = append(parents, f.title)
			}
			parentDynamic = parentDynamic || f.dynamic
			if mark == "" && (f.mark == "skip" || f.mark == "todo") {
				mark = f.mark
			}
		}
		name := strings.Join(append(slices.Clone(parents), title), titleSep)
		if dynamic {
			name = strings.Join(parents, titleSep)
		}
		if !parentDynamic {
			tests = append(tests, DeclaredTest{File: file, Line: t.line, Lang: "js", Name: name, Mark: mark, Suite: isSuite, Dynamic: dynamic})
		}
		title2 := title
		if dynamic {
			title2 = ""
		}
		depth++
		frames = append(frames, jsFrame{depth: depth, title: title2, suite: isSuite, dynamic: dynamic || parentDynamic, mark: mark, context: context})
		i = j
	}
	return tests
}

// jsInTestWithContext: the innermost test open is a test whose callback
// takes name as its context.
func jsInTestWithContext(frames []jsFrame, name string) bool {
	for i := len(frames) - 1; i >= 0; i-- {
		if !frames[i].suite {
			return frames[i].context == name
		}
	}
	return false
}

// jsClose is the index of the ")" that closes the "(" at toks[open].
func jsClose(toks []jsToken, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch toks[i].text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// jsCallback reads what follows a test's title: node:test's options
// ({ skip: true } or { todo: … } make it skipped or todo) and the first
// parameter of its callback (the test context, t).
func jsCallback(toks []jsToken, i int) (mark, context string) {
	if i >= len(toks) || toks[i].text != "," {
		return "", ""
	}
	i++
	if i < len(toks) && toks[i].text == "{" {
		depth := 0
		for ; i < len(toks); i++ {
			switch toks[i].text {
			case "{":
				depth++
			case "}":
				depth--
			case "skip", "todo":
				if depth == 1 && i+2 < len(toks) && toks[i+1].text == ":" && toks[i+2].text != "false" {
					mark = toks[i].text
				} else if depth == 1 && i+1 < len(toks) && (toks[i+1].text == "," || toks[i+1].text == "}") {
					mark = toks[i].text // { skip } shorthand
				}
			}
			if depth == 0 {
				break
			}
		}
		i++
		if i >= len(toks) || toks[i].text != "," {
			return mark, ""
		}
		i++
	}
	if i < len(toks) && toks[i].text == "async" {
		i++
	}
	if i < len(toks) && toks[i].text == "function" {
		i++
		if i < len(toks) && toks[i].kind == 'i' {
			i++ // a named function
		}
	}
	switch {
	case i+1 < len(toks) && toks[i].text == "(" && toks[i+1].kind == 'i':
		return mark, toks[i+1].text
	case i+2 < len(toks) && toks[i].kind == 'i' && toks[i+1].text == "=" && toks[i+2].text == ">":
		return mark, toks[i].text
	}
	return mark, ""
}
