package gate

import (
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"path"
	"runtime"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// declaredGo lists the tests a _test.go file declares as go test runs
// them: TestX(t *testing.T), FuzzX(f *testing.F) (its seed corpus runs as
// a test), and ExampleX() with an output comment. A file that does not
// parse declares nothing.
func declaredGo(file string, src []byte, pkg string) []DeclaredTest {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	testing := map[string]bool{} // the names the file imports "testing" as
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "testing" {
			name := "testing"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			testing[name] = true
		}
	}
	conditional := !goFileBuilds(file, f)
	var tests []DeclaredTest
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Body == nil {
			continue
		}
		name := fn.Name.Name
		runs := false
		switch {
		case goTestName(name, "Test") && name != "TestMain":
			runs = goTakes(fn, testing, "T")
		case goTestName(name, "Fuzz"):
			runs = goTakes(fn, testing, "F")
		case goTestName(name, "Example"):
			runs = fn.Type.Params.NumFields() == 0 && fn.Type.Results.NumFields() == 0 && goHasOutput(f, fn)
		}
		if runs {
			tests = append(tests, DeclaredTest{File: file, Line: fset.Position(fn.Pos()).Line, Lang: "go", Name: name, Package: pkg, Conditional: conditional})
		}
	}
	return tests
}

// goTestName: prefix alone, or followed by a character that is not a
// lower-case letter (go test's rule: TestAdd and Test_add run, Testify
// does not).
func goTestName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !unicode.IsLower(r)
}

// goTakes: the function's one parameter is *testing.<typ>.
func goTakes(fn *ast.FuncDecl, testing map[string]bool, typ string) bool {
	if fn.Type.Params.NumFields() != 1 || fn.Type.Results.NumFields() != 0 {
		return false
	}
	star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && testing[x.Name] && sel.Sel.Name == typ
}

// goHasOutput: the example's body ends with an "Output:" comment, the
// only examples go test runs.
func goHasOutput(f *ast.File, fn *ast.FuncDecl) bool {
	for _, g := range f.Comments {
		if g.Pos() < fn.Body.Lbrace || g.End() > fn.Body.Rbrace {
			continue
		}
		text := strings.TrimSpace(g.Text())
		if strings.HasPrefix(text, "Output:") || strings.HasPrefix(text, "Unordered output:") ||
			strings.HasPrefix(strings.ToLower(text), "output:") || strings.HasPrefix(strings.ToLower(text), "unordered output:") {
			return true
		}
	}
	return false
}

var knownOS = map[string]bool{"aix": true, "android": true, "darwin": true, "dragonfly": true, "freebsd": true, "illumos": true, "ios": true,
	"js": true, "linux": true, "netbsd": true, "openbsd": true, "plan9": true, "solaris": true, "wasip1": true, "windows": true}

var knownArch = map[string]bool{"386": true, "amd64": true, "arm": true, "arm64": true, "loong64": true, "mips": true, "mips64": true,
	"mips64le": true, "mipsle": true, "ppc64": true, "ppc64le": true, "riscv64": true, "s390x": true, "wasm": true}

// goFileBuilds: the file builds on this platform without build tags
// (its //go:build line and its _GOOS / _GOARCH name). A test in a file
// that needs a tag (integration) may not run in every gate.
func goFileBuilds(file string, f *ast.File) bool {
	stem := strings.TrimSuffix(strings.TrimSuffix(path.Base(file), ".go"), "_test")
	parts := strings.Split(stem, "_")
	if n := len(parts); n >= 2 {
		last, prev := parts[n-1], parts[n-2]
		switch {
		case knownArch[last] && knownOS[prev]:
			if last != runtime.GOARCH || prev != runtime.GOOS {
				return false
			}
		case knownArch[last] && last != runtime.GOARCH, knownOS[last] && last != runtime.GOOS:
			return false
		}
	}
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return false
			}
			return expr.Eval(func(tag string) bool {
				switch tag {
				case runtime.GOOS, runtime.GOARCH, "gc", "cgo":
					return true
				case "unix":
					return runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1"
				}
				return strings.HasPrefix(tag, "go1.")
			})
		}
	}
	return true
}
