package judge

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"slices"
	"strings"
)

// protectedCheck refuses work that changes or deletes a protected file —
// a test file or test-harness configuration that exists at the item's
// base, or a configured protected glob — unless a person allowed test
// changes on the item. New tests go in new files. In the sandbox the
// agent cannot write them at all; this check holds without it.
//
// With Judge.Declarations, a Go test file may also gain declarations: a
// change passes when every top-level declaration the file had at the base
// is still there byte for byte (a line added inside an existing test, an
// early return, is an edit and is refused).
type protectedCheck struct{}

func (protectedCheck) Name() string { return "protected files" }
func (protectedCheck) Stage() Stage { return Commit }

func (protectedCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	if c.Claim.AllowTestChanges || c.contract == nil {
		return Finding{Skipped: true}
	}
	var touched []string
	for _, ch := range c.changes {
		switch {
		case slices.Contains(c.contract.Protected, ch.Path):
			if ch.Status == 'M' && j.Declarations && strings.HasSuffix(ch.Path, "_test.go") && j.keepsDeclarations(ctx, ch.OldBlob, ch.NewBlob) {
				continue
			}
			what := "changed"
			if ch.Status == 'D' {
				what = "deleted"
			}
			touched = append(touched, ch.Path+" ("+what+")")
		case ch.Status == 'M' && slices.Contains(ProtectedSections, path.Base(ch.Path)):
			if sec := j.sectionChanged(ctx, ch.Path, ch.OldBlob, ch.NewBlob); sec != "" {
				touched = append(touched, ch.Path+" ("+sec+" changed)")
			}
		}
	}
	if len(touched) == 0 {
		return Finding{}
	}
	return Finding{Fail: fail("protected files changed: "+list(touched, 5),
		fmt.Sprintf("You changed files that decide whether the work passes: %s. Tests and test configuration that exist at the item's base are protected: make the code pass them, and put new tests in new files. (A person can allow test changes on an item with allow_test_changes: true.)", list(touched, 20)))}
}

// sectionChanged names the test section of a partly protected file that
// differs between two blobs ("" when none does).
func (j *Judge) sectionChanged(ctx context.Context, p, oldID, newID string) string {
	was, err1 := j.Repo.Blob(ctx, oldID)
	now, err2 := j.Repo.Blob(ctx, newID)
	if err1 != nil || err2 != nil {
		return ""
	}
	switch path.Base(p) {
	case "package.json":
		for _, k := range testScripts(was, now) {
			if !bytes.Equal(scriptOf(was, k), scriptOf(now, k)) {
				return "its " + k + " script"
			}
		}
	case "pyproject.toml":
		if iniSection(was, "[tool.pytest") != iniSection(now, "[tool.pytest") {
			return "[tool.pytest]"
		}
	case "setup.cfg":
		if iniSection(was, "[tool:pytest]") != iniSection(now, "[tool:pytest]") {
			return "[tool:pytest]"
		}
	}
	return ""
}

// testScripts are the names of package.json scripts that run tests (test,
// pretest, posttest, test:*) in either version.
func testScripts(docs ...[]byte) []string {
	var names []string
	for _, d := range docs {
		for k := range scriptsOf(d) {
			if (k == "test" || k == "pretest" || k == "posttest" || strings.HasPrefix(k, "test:")) && !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.Sort(names)
	return names
}

func scriptsOf(doc []byte) map[string][]byte {
	out := map[string][]byte{}
	raw := jsonSection(doc, "scripts")
	if raw == nil {
		return out
	}
	var m map[string]any
	if err := jsonUnmarshal(raw, &m); err != nil {
		return out
	}
	for k := range m {
		out[k] = jsonSection(raw, k)
	}
	return out
}

func scriptOf(doc []byte, name string) []byte { return scriptsOf(doc)[name] }

// iniSection is the text of the sections of an INI or TOML document whose
// header starts with prefix.
func iniSection(doc []byte, prefix string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			in = strings.HasPrefix(t, prefix)
		}
		if in {
			b.WriteString(t + "\n")
		}
	}
	return b.String()
}

// keepsDeclarations reports whether every top-level declaration of the Go
// file oldID is in newID byte for byte.
func (j *Judge) keepsDeclarations(ctx context.Context, oldID, newID string) bool {
	was, err1 := j.Repo.Blob(ctx, oldID)
	now, err2 := j.Repo.Blob(ctx, newID)
	if err1 != nil || err2 != nil {
		return false
	}
	before, ok1 := declarations(was)
	after, ok2 := declarations(now)
	if !ok1 || !ok2 {
		return false
	}
	for name, src := range before {
		if after[name] != src {
			return false
		}
	}
	return true
}

// declarations maps each top-level declaration of a Go file (by kind and
// name; imports and the package clause as one each) to its source text.
func declarations(src []byte) (map[string]string, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, false
	}
	out := map[string]string{"package": f.Name.Name}
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	for i, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := "func " + d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				name = "method " + text(d.Recv.List[0].Type) + "." + d.Name.Name
			}
			out[name] = text(d)
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue // imports may grow with new tests
			}
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out["type "+s.Name.Name] = text(s)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out[d.Tok.String()+" "+n.Name] = text(s)
					}
				default:
					out[fmt.Sprintf("decl %d", i)] = text(s)
				}
			}
		}
	}
	return out, true
}
