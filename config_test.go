package fluentcore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
)

// configTypes are Config and the types of its fields that a user fills in: their fields
// are what a reader of Config meets.
var configTypes = map[string]string{ // type: the file that declares it
	"Config": "config.go", "InfoConfig": "config.go", "ErrConfig": "config.go",
	"TagsConfig": "config.go", "SpillConfig": "config.go", "SecurityConfig": "config.go",
	"MetricsConfig": "config.go", "TimeoutsConfig": "config.go", "TransportConfig": "config.go",
	"Server": "config.go", "TLSFiles": "config.go", "DegradeConfig": "degrade.go",
}

// Config reads in a minute: at most 15 fields at its top, the rest in groups; and every
// field of it and of its groups has a doc comment of at most 6 lines that starts with the
// field's name and says its default (the detail is in docs/configuration.md).
func TestConfigReadsInAMinute(t *testing.T) {
	if n := reflect.TypeFor[Config]().NumField(); n > 15 {
		t.Errorf("Config has %d fields at its top, want at most 15", n)
	}
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	seen := 0
	for typ, file := range configTypes {
		f := parsed[file]
		if f == nil {
			var err error
			if f, err = parser.ParseFile(fset, file, nil, parser.ParseComments); err != nil {
				t.Fatal(err)
			}
			parsed[file] = f
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != typ {
				return true
			}
			seen++
			for _, field := range ts.Type.(*ast.StructType).Fields.List {
				checkFieldDoc(t, typ, field)
			}
			return false
		})
	}
	if seen != len(configTypes) {
		t.Errorf("found %d of the %d config types", seen, len(configTypes))
	}
}

// checkFieldDoc reports a field of typ whose doc comment is missing, longer than 6 lines,
// does not start with the field's name, or does not say its default.
func checkFieldDoc(t *testing.T, typ string, field *ast.Field) {
	t.Helper()
	for _, name := range field.Names {
		if !name.IsExported() {
			continue
		}
		if len(field.Names) > 1 {
			t.Errorf("%s.%s shares its doc comment with %d other fields", typ, name.Name, len(field.Names)-1)
		}
		doc := ""
		if field.Doc != nil {
			doc = field.Doc.Text()
		}
		lines := strings.Count(doc, "\n")
		switch {
		case doc == "":
			t.Errorf("%s.%s has no doc comment", typ, name.Name)
		case lines > 6:
			t.Errorf("%s.%s: a doc comment of %d lines, want at most 6 (the rest in docs/configuration.md)", typ, name.Name, lines)
		case !strings.HasPrefix(doc, name.Name+" ") && !strings.HasPrefix(doc, name.Name+","):
			t.Errorf("%s.%s: the doc comment starts %q, want the field's name", typ, name.Name, strings.SplitN(doc, " ", 2)[0])
		case !strings.Contains(doc, "Default") && !strings.Contains(doc, "Required"):
			t.Errorf("%s.%s: the doc comment does not say its default", typ, name.Name)
		}
	}
}
