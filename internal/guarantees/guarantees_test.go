package guarantees

import (
	"reflect"
	"strings"
	"testing"
)

func TestSpliceExtractRows(t *testing.T) {
	doc := "# x\n\nintro\n" + Begin + "\nold\n" + End + "\n\nafter\n"
	table := "| a | b |\n|---|---|\n| one | 1 |\n| two | 0 |\n"
	out, err := Splice([]byte(doc), []byte(table))
	if err != nil {
		t.Fatal(err)
	}
	want := "# x\n\nintro\n" + Begin + "\n" + strings.TrimSuffix(table, "\n") + "\n" + End + "\n\nafter\n"
	if string(out) != want {
		t.Fatalf("Splice:\n%s\nwant:\n%s", out, want)
	}
	again, err := Splice(out, []byte(table))
	if err != nil || string(again) != want {
		t.Fatalf("Splice is not idempotent: %q, %v", again, err)
	}
	got, err := Extract(out)
	if err != nil || string(got) != strings.TrimSuffix(table, "\n") {
		t.Fatalf("Extract: %q, %v", got, err)
	}
	if rows := Rows(got); !reflect.DeepEqual(rows, [][]string{{"one", "1"}, {"two", "0"}}) {
		t.Fatalf("Rows: %q", rows)
	}
	for _, bad := range []string{"no markers", End + Begin, Begin + Begin + End} {
		if _, err := Splice([]byte(bad), []byte(table)); err == nil {
			t.Errorf("Splice(%q) accepted", bad)
		}
	}
}
