package docfmt

import "io"

// PageTreeCount is PDF without the fallback of scanning for pages, so that
// tests can tell which way a count was found.
func PageTreeCount(r io.ReaderAt, size int64) (int, error) {
	d, off, err := openPDF(r, size)
	if err != nil {
		return 0, err
	}
	return d.pageTreeCount(off)
}
