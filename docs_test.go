package fluentcore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/fluentcore/fluentcore"
)

// The documentation's code cannot rot: every ```go block of README.md and docs/*.md is
// compiled (TestDocSnippetsCompile), and every relative link in them points at a file, and a
// heading, that exists (TestDocLinksResolve).
//
// The convention (docs/testing.md, "The project's own tests", says it for writers):
//   - A block that starts with a package clause is a whole file, compiled as it stands in a
//     package of its own (package main needs its main).
//   - Any other block is a fragment, compiled as the body of a function with the parameters
//     of fragmentParams in scope and the imports of fragmentImports; leading `import` lines
//     of the fragment are added to those.
//   - A variable a fragment declares at its top level counts as used (the function it is
//     part of would go on to use it); one declared in an inner block must be used there.
//   - A fragment that is one expression and not a call (a fluentcore.Config{…} literal) is
//     compiled as `_ = <expression>`.
//   - README.md's blocks must be whole files: a newcomer pastes them as they are.
//
// All blocks are vetted in one `go vet` run of a temporary module that requires this one by
// a replace directive, with this module's requirements and go.sum, offline (GOPROXY=off):
// only packages this module's own build and tests use can be imported. Errors name the
// Markdown file and line (each block carries a //line directive).

// docPages are the Markdown files whose blocks and links are checked.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// fragmentImports are imported by the file a fragment is compiled in (each also used once
// at package level, so that a fragment need not use them all).
var fragmentImports = []struct{ path, use string }{
	{"context", "context.Background"},
	{"crypto/tls", "tls.VersionTLS12"},
	{"crypto/x509", "x509.NewCertPool"},
	{"errors", "errors.New"},
	{"fmt", "fmt.Sprint"},
	{"log", "log.Print"},
	{"log/slog", "slog.New"},
	{"net/http", "http.NewServeMux"},
	{"os", "os.Getenv"},
	{"testing", "testing.Short"},
	{"time", "time.Now"},
	{"github.com/fluentcore/fluentcore", "fluentcore.New"},
	{"github.com/fluentcore/fluentcore/forwardtest", "forwardtest.Start"},
	{"github.com/prometheus/client_golang/prometheus", "prometheus.NewRegistry"},
	{"github.com/prometheus/client_golang/prometheus/promhttp", "promhttp.Handler"},
	{"go.uber.org/zap", "zap.New"},
	{"go.uber.org/zap/zapcore", "zapcore.InfoLevel"},
	{"go.uber.org/zap/exp/zapslog", "zapslog.NewHandler"},
}

// fragmentParams are in scope in a fragment; it may declare its own of the same names.
const fragmentParams = "core *fluentcore.Core, logger *zap.Logger, t *testing.T, ctx context.Context, err error, id string"

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string // as given, relative to the module root
	line int    // of the block's first line of code (the line after the fence)
	lang string // the info string's first word, lower case
	code string
}

var fenceRE = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})\\s*([^`\\s]*)")

// markdownBlocks returns the fenced code blocks of a Markdown document.
func markdownBlocks(file string, doc []byte) []docBlock {
	var (
		blocks  []docBlock
		cur     *docBlock
		fence   string
		indent  int
		code    strings.Builder
		lineNum int
	)
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lineNum++
		line := sc.Text()
		if cur == nil {
			if m := fenceRE.FindStringSubmatch(line); m != nil {
				cur = &docBlock{file: file, line: lineNum + 1, lang: strings.ToLower(m[3])}
				fence, indent = m[2], len(m[1])
				code.Reset()
			}
			continue
		}
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) <= 3 && strings.HasPrefix(trimmed, fence) &&
			strings.TrimRight(trimmed, fence[:1]+" \t") == "" {
			cur.code = code.String()
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		for i := 0; i < indent && strings.HasPrefix(line, " "); i++ {
			line = line[1:]
		}
		code.WriteString(line)
		code.WriteByte('\n')
	}
	return blocks
}

// isWholeFile reports whether a block starts with a package clause (after comments).
func isWholeFile(code string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", code, parser.PackageClauseOnly)
	return err == nil
}

// snippetSource returns the Go file a block is compiled as. at is the block's position for
// the //line directives: an absolute path, so that errors name the Markdown file.
func snippetSource(b docBlock, at string) string {
	if isWholeFile(b.code) {
		return fmt.Sprintf("//line %s:%d\n%s", at, b.line, b.code)
	}
	// Leading import declarations: parsed as a file's, up to the line the last one ends on.
	lines := strings.SplitAfter(b.code, "\n")
	var own []string
	bodyLine := 0
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", "package p\n"+b.code, parser.ImportsOnly); err == nil {
		for _, d := range f.Decls {
			bodyLine = fset.Position(d.End()).Line - 1 // "package p" is line 1
		}
		for _, s := range f.Imports {
			own = append(own, importSpec(s))
		}
	}
	body := strings.Join(lines[min(bodyLine, len(lines)):], "")

	var src strings.Builder
	src.WriteString("package snippet\n\nimport (\n")
	have := map[string]bool{}
	for _, s := range own {
		src.WriteString("\t" + s + "\n")
		if _, path, ok := strings.Cut(s, `"`); ok { // an import spec: [name] "path"
			have[strings.TrimSuffix(path, `"`)] = true
		}
	}
	for _, imp := range fragmentImports {
		if !have[imp.path] {
			fmt.Fprintf(&src, "\t%q\n", imp.path)
		}
	}
	src.WriteString(")\n\n")
	for _, imp := range fragmentImports {
		fmt.Fprintf(&src, "var _ = %s\n", imp.use)
	}
	fmt.Fprintf(&src, "\nfunc _(%s) {\n\t{\n", fragmentParams)
	if isValueExpr(body) {
		fmt.Fprintf(&src, "_ =\n//line %s:%d\n%s\n", at, b.line+bodyLine, body)
	} else {
		fmt.Fprintf(&src, "//line %s:%d\n%s\n", at, b.line+bodyLine, useTopLevelVars(body))
	}
	src.WriteString("\t}\n}\n")
	return src.String()
}

// useTopLevelVars returns a fragment's statements with each variable they declare at the
// top level marked used (`; _ = v` after its declaration, on the same line): a fragment is
// part of a function whose rest would use them. Variables of inner blocks are not marked.
func useTopLevelVars(body string) string {
	const head = "package p\nfunc _() {\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", head+body+"\n}\n", parser.SkipObjectResolution)
	if err != nil || len(f.Decls) != 1 {
		return body // the compiler reports the syntax error, at its place
	}
	type insert struct {
		at   int
		text string
	}
	var ins []insert
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		var names []*ast.Ident
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						names = append(names, id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					names = append(names, sp.(*ast.ValueSpec).Names...)
				}
			}
		}
		var text strings.Builder
		for _, id := range names {
			if id.Name != "_" {
				text.WriteString("; _ = " + id.Name)
			}
		}
		if text.Len() > 0 {
			ins = append(ins, insert{fset.Position(st.End()).Offset - len(head), text.String()})
		}
	}
	for i := len(ins) - 1; i >= 0; i-- {
		body = body[:ins[i].at] + ins[i].text + body[ins[i].at:]
	}
	return body
}

// importSpec renders an import as source: optional name, quoted path.
func importSpec(s *ast.ImportSpec) string {
	if s.Name != nil {
		return s.Name.Name + " " + s.Path.Value
	}
	return s.Path.Value
}

// isValueExpr reports whether code is one expression whose value would otherwise be unused
// (a composite literal, say), rather than a call that is a statement of its own.
func isValueExpr(code string) bool {
	e, err := parser.ParseExpr(code)
	if err != nil {
		return false
	}
	switch e := ast.Unparen(e).(type) {
	case *ast.CallExpr:
		return false
	case *ast.UnaryExpr:
		return e.Op != token.ARROW
	}
	return true
}

// goTool returns the go command (go test puts its own first on PATH).
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command to compile the documentation's blocks with:", err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// snippetModule returns the go.mod of the temporary module: this module's requirements, and
// this module itself replaced by its directory.
func snippetModule(t *testing.T, root string) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("module fluentcore.docsnippets\n\n")
	inRequire := false
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inRequire:
			b.WriteString(line)
			inRequire = f[0] != ")"
		case f[0] == "go" || f[0] == "toolchain":
			b.WriteString(line)
		case f[0] == "require":
			b.WriteString(line)
			inRequire = len(f) == 2 && f[1] == "("
		}
	}
	fmt.Fprintf(&b, "\nrequire github.com/fluentcore/fluentcore v0.0.0-00010101000000-000000000000\n")
	fmt.Fprintf(&b, "\nreplace github.com/fluentcore/fluentcore => %s\n", root)
	return b.String()
}

func TestDocSnippetsCompile(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var blocks []docBlock
	for _, page := range docPages(t) {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range markdownBlocks(page, doc) {
			if b.lang != "go" {
				continue
			}
			if page == "README.md" && !isWholeFile(b.code) {
				t.Errorf("%s:%d: a go block in the README must be a whole file (package main, imports, main): it is what a newcomer pastes", page, b.line)
			}
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no go blocks found: the README's Quickstart at least should be one")
	}
	where := map[string]string{} // package directory -> block position, for errors without one
	for i, b := range blocks {
		dir := fmt.Sprintf("b%03d", i)
		where[dir] = fmt.Sprintf("%s:%d", b.file, b.line)
		if err := os.Mkdir(filepath.Join(tmp, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		src := snippetSource(b, filepath.Join(root, b.file))
		if err := os.WriteFile(filepath.Join(tmp, dir, "snippet.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte(snippetModule(t, root)), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), goTool(t), "vet", "./...")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Logf("%d go blocks of %d files compile and vet clean", len(blocks), len(docPages(t)))
		return
	}
	msg := strings.ReplaceAll(string(out), root+string(filepath.Separator), "")
	for dir, at := range where { // lines a //line directive did not map
		msg = strings.ReplaceAll(msg, "fluentcore.docsnippets/"+dir, "fluentcore.docsnippets/"+dir+" (the block at "+at+")")
	}
	t.Errorf("the documentation's go blocks do not compile (%v); positions are in the Markdown files:\n%s", err, msg)
}

// linkRE matches a Markdown inline link or image target; codeSpanRE an inline code span.
var (
	linkRE     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	headingRE  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// markdownText returns a document's lines outside fenced code blocks, by line number.
func markdownText(doc []byte) map[int]string {
	text := map[int]string{}
	in := ""
	for i, line := range strings.Split(string(doc), "\n") {
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case in == "":
				in = m[2]
				continue
			case strings.HasPrefix(strings.TrimSpace(line), in) && m[3] == "":
				in = ""
				continue
			}
		}
		if in == "" {
			text[i+1] = line
		}
	}
	return text
}

// anchors returns the fragment identifiers GitHub gives a document's headings.
func anchors(doc []byte) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	text := markdownText(doc)
	for _, n := range slices.Sorted(maps.Keys(text)) {
		m := headingRE.FindStringSubmatch(text[n])
		if m == nil {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(m[2]) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		id := slug.String()
		if k := seen[id]; k > 0 {
			ids[fmt.Sprintf("%s-%d", id, k)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func TestDocLinksResolve(t *testing.T) {
	for _, page := range docPages(t) {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := markdownText(doc)
		for _, n := range slices.Sorted(maps.Keys(text)) {
			line := text[n]
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(page), path))
				}
				if !fileExists(file) {
					t.Errorf("%s:%d: link %q: %s does not exist", page, n, target, file)
					continue
				}
				if anchor == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				targetDoc, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(targetDoc)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", page, n, target, file, anchor)
				}
			}
		}
	}
}

// The README stays a page a user reads to the end (issue 27): the reference is in docs/.
func TestReadmeIsShort(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 250 {
		t.Errorf("README.md has %d lines, more than 250: move reference material to docs/", n)
	}
}

// The extraction itself: positions, languages, and how a block is compiled.
func TestMarkdownBlocks(t *testing.T) {
	doc := "# t\n\n```go\nx := 1\n_ = x\n```\n\ntext\n\n```yaml\na: b\n```\n\n````go\npackage main\n\nfunc main() {}\n````\n"
	got := markdownBlocks("d.md", []byte(doc))
	if len(got) != 3 {
		t.Fatalf("%d blocks, want 3: %+v", len(got), got)
	}
	if b := got[0]; b.line != 4 || b.lang != "go" || b.code != "x := 1\n_ = x\n" || isWholeFile(b.code) {
		t.Errorf("first block: %+v", b)
	}
	if b := got[1]; b.line != 11 || b.lang != "yaml" {
		t.Errorf("second block: %+v", b)
	}
	if b := got[2]; b.line != 15 || !isWholeFile(b.code) {
		t.Errorf("third block: %+v", b)
	}
	for code, want := range map[string]bool{
		"fluentcore.Config{Addr: \"x\"} // a comment\n": true,
		"core.Close()\n":         false,
		"x := 1\n":               false,
		"<-ch\n":                 false,
		"&fluentcore.Config{}\n": true,
	} {
		if isValueExpr(code) != want {
			t.Errorf("isValueExpr(%q) = %v, want %v", code, !want, want)
		}
	}
	if got := useTopLevelVars("a, b := 1, 2 // two\nif a > 0 {\n\tc := 3\n}\nvar d = 4\n"); got != "a, b := 1, 2; _ = a; _ = b // two\nif a > 0 {\n\tc := 3\n}\nvar d = 4; _ = d\n" {
		t.Errorf("useTopLevelVars:\n%s", got)
	}
	src := snippetSource(docBlock{file: "d.md", line: 10, lang: "go", code: "import \"go.uber.org/zap/exp/zapslog\"\n\nh := zapslog.NewHandler(core)\n_ = h\n"}, "/abs/d.md")
	if !strings.Contains(src, "//line /abs/d.md:11\n\nh := zapslog") || strings.Count(src, `"go.uber.org/zap/exp/zapslog"`) != 1 {
		t.Errorf("fragment with an import:\n%s", src)
	}
}

// README.md and docs/ are for users: what the library does and promises, not the project's
// history. No page names an issue, a commit or a date, speaks of how things were before, or
// tells of benchmark rounds; that is what git log and bench/ are for. Nor does a page name
// the project's test, benchmark or fuzz functions: it says what is checked, and at most in
// which file (Example functions are godoc, and fine). A phrase may span a line break.
func TestUserDocsCarryNoHistory(t *testing.T) {
	const (
		wholePage   = iota
		outsideCode // outside fenced code blocks: a user's own test in an example is named like one
	)
	checks := []struct {
		what  string
		where int
		re    *regexp.Regexp
	}{
		{"an issue number", wholePage, regexp.MustCompile(`(?i)\bissues?\s+#?\d+`)},
		// A hex word of 7 to 40 characters with both a digit and a letter: a commit hash.
		{"a commit hash", wholePage, regexp.MustCompile(`\b(?:[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*|[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*)\b`)},
		{"a date", wholePage, regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b`)},
		{"history", wholePage, regexp.MustCompile(`(?i)\bas\s+before\b|\bbefore\s+(?:its|the)\s+fix\b|\bearlier\s+runs\b|\bmeant\s+before\b|\bthan\s+before\b`)},
		{"benchmark rounds", wholePage, regexp.MustCompile(`(?i)\brounds\b|\balternated\b|\bin\s+every\s+round\b`)},
		{"a test, benchmark or fuzz function", outsideCode, regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z]\w*`)},
	}
	for _, page := range docPages(t) {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		// The page two ways, each line kept in its place (blanked where it is left out).
		lines := strings.Split(string(doc), "\n")
		text := [2][]string{wholePage: lines, outsideCode: make([]string, len(lines))}
		prose := markdownText(doc)
		for i := range lines {
			text[outsideCode][i] = prose[i+1]
		}
		for _, c := range checks {
			s := strings.Join(text[c.where], "\n")
			for _, m := range c.re.FindAllStringIndex(s, -1) {
				found := s[m[0]:m[1]]
				if c.what == "a commit hash" && (len(found) < 7 || len(found) > 40) {
					continue
				}
				line := 1 + strings.Count(s[:m[0]], "\n")
				t.Errorf("%s:%d: %s (%q): a user page says what the library does and what is checked; history is for git log, test names for the tests", page, line, c.what, found)
			}
		}
	}
}

// Every variable ConfigFromEnv reads is documented where users look it up.
func TestEveryEnvVariableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	names := fluentcore.EnvNames()
	if len(names) < 10 {
		t.Fatalf("only %d variables found: %v", len(names), names)
	}
	for _, name := range names {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).Match(doc) {
			t.Errorf("%s is read by ConfigFromEnv but not named in docs/configuration.md", name)
		}
	}
}

// The guarantees are stated in one place, docs/guarantees.md; README.md and the package
// documentation (doc.go, what pkg.go.dev shows) name them in a line or two and link there.
// A test that looked for restated wording would break on every rephrasing; the links are
// what must not go missing.
func TestGuaranteesAreLinked(t *testing.T) {
	const page = "docs/guarantees.md"
	if !fileExists(page) {
		t.Fatalf("%s is missing: it is where the guarantees are stated", page)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := false
	for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(string(readme), ""), -1) {
		path, _, _ := strings.Cut(m[1], "#")
		linked = linked || path == page
	}
	if !linked {
		t.Errorf("README.md has no link to %s", page)
	}

	// doc.go links with a doc link definition, [name]: URL, to the page on the module's
	// repository, and uses [name] in its text.
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module, _, _ := strings.Cut(strings.TrimPrefix(string(gomod), "module "), "\n")
	url := "https://" + strings.TrimSpace(module) + "/blob/main/" + page
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	def := regexp.MustCompile(`(?m)^// \[([^\]]+)\]: ` + regexp.QuoteMeta(url) + `$`).FindSubmatch(src)
	switch {
	case def == nil:
		t.Errorf("doc.go has no doc link definition `// [name]: %s`", url)
	case bytes.Count(src, []byte("["+string(def[1])+"]")) < 2:
		t.Errorf("doc.go defines the link [%s] but does not use it in its text", def[1])
	}
}
