package fluentcore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The packages under internal/ form a one-way order (ARCHITECTURE.md): none imports the
// root, and each imports only the internal packages listed for it here (their tests also
// testkit and forwardtest). The
// compiler catches a cycle through the root only once the root imports the package; this
// catches the wrong edge as soon as it is written, tests included.
func TestInternalPackagesImportOneWay(t *testing.T) {
	const module = "github.com/fluentcore/fluentcore"
	allowed := map[string][]string{
		"internal/wire":        nil,
		"internal/spill":       {"internal/wire"},
		"internal/dial":        nil,
		"internal/reflectplan": nil,
		"internal/msgpenc":     {"internal/reflectplan", "internal/wire"},
		"internal/zapenc":      {"internal/msgpenc", "internal/wire"},
		"internal/outcome":     nil,
		"internal/stream": {"internal/degrade", "internal/dial", "internal/forward", "internal/msgpenc", "internal/outcome",
			"internal/ring", "internal/spill", "internal/tagtable", "internal/zapenc"},
		"internal/tagtable": nil,
		"internal/shed":     nil,
		"internal/degrade":  {"internal/shed"},
		"internal/order":    nil,
		"internal/ring":     {"internal/wire", "internal/order"},
		"internal/forward":  {"internal/dial", "internal/ring", "internal/wire"},
		"internal/testkit":  nil,
		// The fault suite's table: a tool of the tests, outside the library's order.
		"internal/guarantees":        nil,
		"internal/guarantees/splice": {"internal/guarantees"},
	}
	seen := map[string]bool{}
	err := filepath.WalkDir("internal", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if strings.Contains(dir, "/testdata") {
			return nil
		}
		seen[dir] = true
		want, known := allowed[dir]
		if !known {
			t.Errorf("%s: a package this test does not know: add it to the order here and in ARCHITECTURE.md", dir)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") { // tests may use the shared test helpers and receiver
			want = append(slices.Clip(want), "internal/testkit", "forwardtest")
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rel, ours := strings.CutPrefix(p, module+"/")
			switch {
			case p == module:
				t.Errorf("%s imports the root package", path)
			case ours && !slices.Contains(want, rel) && rel != dir:
				t.Errorf("%s imports %s; %s may import only %v", path, rel, dir, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range allowed {
		if !seen[dir] {
			t.Errorf("%s is in the order but has no Go files", dir)
		}
	}
}

// The library's own code keeps no sync.Pool (ARCHITECTURE.md, promise 1): its buffers are
// allocated once and owned by the sink. Tests and the bench module may use one.
func TestNoSyncPool(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "bench" || path == "interop" || strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "sync."+"Pool") {
			t.Errorf("%s uses sync.Pool", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The root's files are ordered too (ARCHITECTURE.md, the diagram): each uses only the files
// on its own line of the diagram or below it, and every file that declares anything is on
// it. What a file uses is read from its syntax: package-level names it does not declare
// itself, and the unexported methods and fields it selects that exactly one file declares
// (an exported one may be another package's). That misses a use through an unexported name
// two files declare, but never reports one that is not there.
func TestRootFilesUseOnlyTheFilesBelowThem(t *testing.T) {
	levels := rootFileLevels(t)
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); !ok || g.Tok != token.IMPORT {
				files[name] = f // it declares something besides its imports
				break
			}
		}
	}
	declaredIn := map[string]string{}   // package-level name -> its file
	selectable := map[string][]string{} // unexported method or field name -> the files declaring one
	for name, f := range files {
		if _, ok := levels[name]; !ok {
			t.Errorf("%s is not in ARCHITECTURE.md's diagram", name)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declaredIn[d.Name.Name] = name
				} else if !d.Name.IsExported() {
					selectable[d.Name.Name] = append(selectable[d.Name.Name], name)
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						declaredIn[sp.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.Name != "_" {
								declaredIn[n.Name] = name
							}
						}
					}
				}
			}
		}
	}
	for name, f := range files {
		// The fields of every struct type of the file, a function's own ones too: a
		// selector of such a name may be any of them.
		ast.Inspect(f, func(n ast.Node) bool {
			if st, ok := n.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					for _, n := range fl.Names {
						if !n.IsExported() {
							selectable[n.Name] = append(selectable[n.Name], name)
						}
					}
				}
			}
			return true
		})
	}
	for name, f := range files {
		uses := map[string]bool{}
		var inspect func(ast.Node) bool
		inspect = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl: // its name is declared here, not used
				if n.Recv != nil {
					ast.Inspect(n.Recv, inspect)
				}
				ast.Inspect(n.Type, inspect)
				if n.Body != nil {
					ast.Inspect(n.Body, inspect)
				}
				return false
			case *ast.SelectorExpr:
				if decl := selectable[n.Sel.Name]; len(slices.Compact(slices.Sorted(slices.Values(decl)))) == 1 {
					uses[decl[0]] = true
				}
				ast.Inspect(n.X, inspect) // X, not Sel: Sel is never a package-level name
				return false
			case *ast.Ident:
				if n.Obj == nil { // not declared in this file's scopes
					if file, ok := declaredIn[n.Name]; ok {
						uses[file] = true
					}
				}
			}
			return true
		}
		ast.Inspect(f, inspect)
		for used := range uses {
			if used != name && levels[used] < levels[name] {
				t.Errorf("%s uses %s, which ARCHITECTURE.md's diagram puts above it", name, used)
			}
		}
	}
}

// rootFileLevels reads the diagram of ARCHITECTURE.md: the root's files from the top line
// (level 0) down to the line of internal/; a line that starts with "·" continues the one
// above it.
func rootFileLevels(t *testing.T) map[string]int {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, diagram, _ := strings.Cut(string(doc), "```\n")
	diagram, _, _ = strings.Cut(diagram, "```")
	levels := map[string]int{}
	last := 0
	for i, line := range strings.Split(diagram, "\n") {
		if strings.Contains(line, "internal/") {
			break
		}
		ws := strings.Fields(line)
		if len(ws) > 0 && ws[0] == "·" { // continues the line above: the same level
			i = last
		}
		for _, w := range ws {
			if strings.HasSuffix(w, ".go") {
				levels[w] = i
			}
		}
		last = i
	}
	if len(levels) == 0 {
		t.Fatal("ARCHITECTURE.md has no diagram of the root's files")
	}
	return levels
}
