package dashboard

import "fmt"

// tableCut says what a table preview left out: rows past maxRows, columns
// past maxCols, or (CSV, TSV) the rest of a file that stops parsing.
type tableCut struct {
	Rows, Cols, Unparsed bool
}

// Note is the sentence under a cut table, naming what was cut; empty when
// nothing was.
func (c tableCut) Note() string {
	var s string
	switch {
	case c.Rows && c.Cols:
		s = fmt.Sprintf("Only the first %s rows and %d columns are shown.", thousands(maxRows), maxCols)
	case c.Rows:
		s = fmt.Sprintf("Only the first %s rows are shown.", thousands(maxRows))
	case c.Cols:
		s = fmt.Sprintf("Only the first %d columns are shown.", maxCols)
	}
	if c.Unparsed {
		if s != "" {
			s += " "
		}
		s += "The rest of the file could not be read as a table: only the rows before it are shown."
	}
	return s
}

// thousands writes n with a comma between thousands (1,000).
func thousands(n int) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return thousands(n/1000) + fmt.Sprintf(",%03d", n%1000)
}
