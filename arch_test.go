package fluentcore

import (
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
		"internal/shed":        nil,
		"internal/order":       nil,
		"internal/testkit":     nil,
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
