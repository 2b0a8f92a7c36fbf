package dashboard

import (
	"bytes"
	"path"
	"strings"
	"unicode/utf8"
)

// A diff compares the first maxPreview bytes of each file, of at most
// maxDiffLines lines each; past either bound the page says so instead.
const maxDiffLines = 10000

// diffContext is the lines of context around each change.
const diffContext = 3

type diffPage struct {
	SandboxID string
	A, B      string
	Dir       string
	// Problem says why there is no diff (a file too large, not text).
	Problem string
	Hunks   []diffHunk
	Same    bool
	Added   int
	Removed int
}

// diffHunk is a hunk as the page draws it: each line with its CSS class.
type diffHunk struct {
	Header string
	Lines  []diffLine
}

type diffLine struct {
	Class, Mark, Text string
}

// handleDiff shows a unified line diff of two files of a sandbox, a and
// b, computed here (linediff.go) and drawn as escaped text.
func (d *Dashboard) handleDiff(rq *req) {
	id := rq.r.PathValue("id")
	q := rq.r.URL.Query()
	p := diffPage{SandboxID: id, A: q.Get("a"), B: q.Get("b"), Dir: "."}
	if p.A != "" {
		p.Dir = path.Dir(p.A)
	}
	if p.A == "" || p.B == "" {
		p.Problem = "Name two files to compare."
		rq.render(d, "diff", p)
		return
	}
	var lines [2][]string
	for i, name := range []string{p.A, p.B} {
		data, err := readHead(rq, id, name)
		if err != nil {
			d.apiFailed(rq, err)
			return
		}
		switch {
		case len(data) > maxPreview:
			p.Problem = name + " is over 1 MiB: too large to compare here; download both files."
		case bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data):
			p.Problem = name + " is not text: only text files are compared."
		default:
			lines[i] = splitLines(string(data))
			if len(lines[i]) > maxDiffLines {
				p.Problem = name + " has over 10,000 lines: too long to compare here; download both files."
			}
		}
		if p.Problem != "" {
			rq.render(d, "diff", p)
			return
		}
	}
	hunks := unified(diffLines(lines[0], lines[1]), diffContext)
	p.Same = len(hunks) == 0
	for _, h := range hunks {
		dh := diffHunk{Header: h.Header}
		for _, e := range h.Lines {
			l := diffLine{Class: "diff-same", Mark: " ", Text: e.Line}
			switch e.Kind {
			case editAdd:
				l.Class, l.Mark = "diff-add", "+"
				p.Added++
			case editDel:
				l.Class, l.Mark = "diff-del", "-"
				p.Removed++
			}
			dh.Lines = append(dh.Lines, l)
		}
		p.Hunks = append(p.Hunks, dh)
	}
	rq.render(d, "diff", p)
}

// splitLines splits text into lines without their ends; a last line
// without an end counts as a line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}
