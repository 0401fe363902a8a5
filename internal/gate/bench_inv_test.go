package gate

import (
	"fmt"
	"testing"
)

// inventoryAtScale is a tree of n Go tests and n pytest tests in n/50
// packages and files, and the report of a gate that ran them all.
func inventoryAtScale(n int) (*Declared, *Tests, *Tests) {
	files := map[string][]byte{"go.mod": []byte("module example.com/big\n")}
	goRep, pyRep := perTest("go-json"), perTest("pytest")
	for f := 0; f < n/50; f++ {
		goSrc := "package p\n\nimport \"testing\"\n\n"
		pySrc := ""
		for i := 0; i < 50; i++ {
			goSrc += fmt.Sprintf("func TestT%d(t *testing.T) {}\n", i)
			pySrc += fmt.Sprintf("def test_t%d():\n    pass\n\n", i)
			goRep.add(fmt.Sprintf("example.com/big/p%d.TestT%d", f, i), Pass)
			goRep.add(fmt.Sprintf("example.com/big/p%d.TestT%d/sub", f, i), Pass)
			pyRep.add(fmt.Sprintf("tests/test_f%d.py::test_t%d", f, i), Pass)
		}
		files[fmt.Sprintf("p%d/p_test.go", f)] = []byte(goSrc)
		files[fmt.Sprintf("tests/test_f%d.py", f)] = []byte(pySrc)
	}
	return DeclareTests(files), goRep.count(), pyRep.count()
}

func BenchmarkCheckInventory(b *testing.B) {
	for _, n := range []int{500, 5000} {
		d, goRep, pyRep := inventoryAtScale(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if p := CheckInventory("go", goRep, goRep, d, d); len(p) > 0 {
					b.Fatal(p[:1])
				}
				if p := CheckInventory("py", pyRep, pyRep, d, d); len(p) > 0 {
					b.Fatal(p[:1])
				}
			}
		})
	}
}
