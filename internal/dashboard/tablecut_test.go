package dashboard

import (
	"fmt"
	"strings"
	"testing"
)

// TestTableCutNote checks that a cut table's note names what was cut:
// rows, columns or both.
func TestTableCutNote(t *testing.T) {
	row := func(cols int) string {
		var b strings.Builder
		for i := range cols {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, i)
		}
		return b.String() + "\n"
	}
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"whole", row(3) + row(3), ""},
		{"columns", row(maxCols+1) + row(2), "Only the first 100 columns are shown."},
		{"rows", strings.Repeat(row(2), maxRows+1), "Only the first 1,000 rows are shown."},
		{"both", strings.Repeat(row(maxCols+5), maxRows+1), "Only the first 1,000 rows and 100 columns are shown."},
	} {
		_, cut := readTable([]byte(tc.data), false)
		if got := cut.Note(); got != tc.want {
			t.Errorf("%s: note = %q (%+v), want %q", tc.name, got, cut, tc.want)
		}
	}
}
