package fluentcore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The limits that keep each part readable at once (ARCHITECTURE.md): a hand-written file
// holds at most maxFileLines lines and a function at most maxFuncLines; a type has at most
// maxMethods methods and, if it has any, at most maxFields fields; an interface has at most
// maxInterfaceMethods methods. Two exceptions: the zap encoder's ObjectEncoder and
// ArrayEncoder, whose methods zap's interfaces fix, one per type of value; and StreamStats,
// a snapshot of counters handed to users, whose methods only add its fields up.
const (
	maxFileLines        = 600
	maxFuncLines        = 100
	maxMethods          = 30
	maxFields           = 25
	maxInterfaceMethods = 8
)

// sizeExempt are the types and files the limits leave out, with the reason.
var sizeExempt = map[string]string{
	"Encoder":     "internal/zapenc's, zap's ObjectEncoder and ArrayEncoder: a method per type of value",
	"StreamStats": "data handed to users: its methods only add its fields up",
}

func TestTypesAndFilesStaySmall(t *testing.T) {
	fset := token.NewFileSet()
	type typeSize struct {
		pos             token.Position
		methods, fields int
	}
	pkgs := map[string]map[string]*typeSize{} // directory → type → size
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// bench/ and interop/ are modules of their own; testdata holds no code.
			if n := d.Name(); path != "." && (n == "bench" || n == "interop" || n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_gen.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		if n := fset.Position(f.End()).Line; n > maxFileLines && sizeExempt[filepath.Base(path)] == "" {
			t.Errorf("%s: %d lines; at most %d", path, n, maxFileLines)
		}
		dir := filepath.Dir(path)
		if pkgs[dir] == nil {
			pkgs[dir] = map[string]*typeSize{}
		}
		sizeOf := func(name string) *typeSize {
			if pkgs[dir][name] == nil {
				pkgs[dir][name] = &typeSize{}
			}
			return pkgs[dir][name]
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if n := fset.Position(decl.End()).Line - fset.Position(decl.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines; at most %d", fset.Position(decl.Pos()), decl.Name.Name, n, maxFuncLines)
				}
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					sizeOf(receiverType(decl.Recv.List[0].Type)).methods++
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					switch typ := ts.Type.(type) {
					case *ast.StructType:
						s := sizeOf(ts.Name.Name)
						s.pos = fset.Position(ts.Pos())
						for _, field := range typ.Fields.List {
							s.fields += max(len(field.Names), 1)
						}
					case *ast.InterfaceType:
						n := 0
						for _, m := range typ.Methods.List {
							if _, ok := m.Type.(*ast.FuncType); ok {
								n++
							}
						}
						if n > maxInterfaceMethods {
							t.Errorf("%s: interface %s has %d methods; at most %d", fset.Position(ts.Pos()), ts.Name.Name, n, maxInterfaceMethods)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, types := range pkgs {
		for name, s := range types {
			if sizeExempt[name] != "" {
				continue
			}
			if s.methods > maxMethods {
				t.Errorf("%s: type %s has %d methods; at most %d", dir, name, s.methods, maxMethods)
			}
			if s.methods > 0 && s.fields > maxFields {
				t.Errorf("%s: type %s (%s) has %d fields and methods; at most %d fields", dir, name, s.pos, s.fields, maxFields)
			}
		}
	}
}

// receiverType is the name of a method's receiver type: T of T, *T, T[P] or *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
