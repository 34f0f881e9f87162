// Command splice puts the table the fault suite generated into docs/guarantees.md between the
// guarantees markers: `make guarantees` runs the suite, then this.
//
//	go run ./internal/guarantees/splice -table build/guarantees.md -doc docs/guarantees.md
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/fluentcore/fluentcore/internal/guarantees"
)

func main() {
	table := flag.String("table", "", "the generated table (written by go test -run TestFaults -args -guarantees=FILE)")
	doc := flag.String("doc", "docs/guarantees.md", "the document to update")
	flag.Parse()
	if err := run(*table, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "splice:", err)
		os.Exit(1)
	}
}

func run(tablePath, docPath string) error {
	table, err := os.ReadFile(tablePath)
	if err != nil {
		return err
	}
	if len(guarantees.Rows(table)) == 0 {
		return fmt.Errorf("%s holds no table rows", tablePath)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	out, err := guarantees.Splice(doc, table)
	if err != nil {
		return err
	}
	return os.WriteFile(docPath, out, 0o644)
}
