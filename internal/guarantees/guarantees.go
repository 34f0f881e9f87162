// Package guarantees keeps the "Guarantees" table of docs/guarantees.md in step with the
// fault suite (faults_test.go in the root package), which generates it: Splice puts a generated
// table between the document's markers, Extract and Rows read it back so a test can compare.
// It is a development tool of this repository, not part of fluentcore's API.
package guarantees

import (
	"bytes"
	"errors"
	"strings"
)

// Begin and End are the marker comments around the generated table in docs/guarantees.md.
const (
	Begin = "<!-- guarantees:begin -->"
	End   = "<!-- guarantees:end -->"
)

// span returns the offsets of the text between the markers (the table).
func span(doc []byte) (start, end int, err error) {
	b := bytes.Index(doc, []byte(Begin))
	e := bytes.Index(doc, []byte(End))
	switch {
	case b < 0 || e < 0:
		return 0, 0, errors.New("guarantees: the document lacks the markers " + Begin + " and " + End)
	case e < b:
		return 0, 0, errors.New("guarantees: " + End + " comes before " + Begin)
	case bytes.Count(doc, []byte(Begin)) != 1 || bytes.Count(doc, []byte(End)) != 1:
		return 0, 0, errors.New("guarantees: each marker must appear once")
	}
	return b + len(Begin), e, nil
}

// Extract returns the text between the markers, without the surrounding newlines.
func Extract(doc []byte) ([]byte, error) {
	s, e, err := span(doc)
	if err != nil {
		return nil, err
	}
	return bytes.Trim(doc[s:e], "\n"), nil
}

// Splice returns doc with the text between the markers replaced by table. The markers
// stay, each on its own line.
func Splice(doc, table []byte) ([]byte, error) {
	s, e, err := span(doc)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(doc)+len(table))
	out = append(out, doc[:s]...)
	out = append(out, '\n')
	out = append(out, bytes.Trim(table, "\n")...)
	out = append(out, '\n')
	return append(out, doc[e:]...), nil
}

// Rows returns the cells of each body row of a markdown table: lines that start with "|",
// after the header and the separator line; cells are trimmed.
func Rows(table []byte) [][]string {
	var rows [][]string
	n := 0
	for line := range strings.Lines(string(table)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		n++
		if n <= 2 { // header and separator
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}
