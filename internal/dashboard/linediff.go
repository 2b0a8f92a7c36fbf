package dashboard

import "strconv"

// A line diff: Myers' O(ND) algorithm in linear space ("An O(ND)
// Difference Algorithm and Its Variations", 1986, section 4b), the way
// diff-match-patch's bisect runs it: find where a forward and a backward
// search of the edit graph meet, split both sides there, and diff each
// half the same way. Lines are compared as small integers (each distinct
// line gets one), so a comparison costs no string compare.

// Edit kinds.
const (
	editSame = iota
	editDel
	editAdd
)

// edit is one line of a diff: kept, deleted from a, or added from b.
type edit struct {
	Kind int
	Line string
}

// diffLines returns the edits that turn a into b: every line of a, in
// order, kept or deleted, and every line of b, in order, kept or added.
// Its time is O((N+M)·D) for N and M lines and D edits; its memory
// O(N+M).
func diffLines(a, b []string) []edit {
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := differ{a: a, b: b, x: intern(a), y: intern(b)}
	d.compare(0, len(a), 0, len(b))
	return d.out
}

type differ struct {
	a, b []string
	x, y []int // a and b as line IDs
	out  []edit
}

// compare appends the edits turning a[a0:a1] into b[b0:b1].
func (d *differ) compare(a0, a1, b0, b1 int) {
	for a0 < a1 && b0 < b1 && d.x[a0] == d.y[b0] {
		d.out = append(d.out, edit{editSame, d.a[a0]})
		a0, b0 = a0+1, b0+1
	}
	suffix := 0
	for a0 < a1 && b0 < b1 && d.x[a1-1] == d.y[b1-1] {
		a1, b1, suffix = a1-1, b1-1, suffix+1
	}
	x, y, ok := 0, 0, false
	if a0 < a1 && b0 < b1 {
		x, y, ok = d.split(a0, a1, b0, b1)
	}
	if ok {
		d.compare(a0, x, b0, y)
		d.compare(x, a1, y, b1)
	} else {
		// One side is empty, or the two share no line.
		for _, l := range d.a[a0:a1] {
			d.out = append(d.out, edit{editDel, l})
		}
		for _, l := range d.b[b0:b1] {
			d.out = append(d.out, edit{editAdd, l})
		}
	}
	for i := range suffix {
		d.out = append(d.out, edit{editSame, d.a[a1+i]})
	}
}

// split returns a point (x, y) where an edit path from (a0, b0) to
// (a1, b1) can be cut in two: where the furthest-reaching forward and
// backward paths of equal cost meet. Both ranges are non-empty and their
// first lines, and their last lines, differ, so the point is neither
// corner and each half is smaller than the whole. When the paths do not
// meet before half of the longest edit script, the ranges share no line
// (false).
func (d *differ) split(a0, a1, b0, b1 int) (int, int, bool) {
	n, m := a1-a0, b1-b0
	maxD := (n + m + 1) / 2
	off := maxD + 1
	// vf[off+k] and vb[off+k] are the furthest x reached on diagonal k
	// (x-y = k) going forward from (a0, b0), and backward from (a1, b1)
	// counted from that end; -1 is not reached yet.
	vf := make([]int, 2*off+1)
	vb := make([]int, 2*off+1)
	for i := range vf {
		vf[i], vb[i] = -1, -1
	}
	vf[off+1], vb[off+1] = 0, 0
	delta := n - m
	odd := delta%2 != 0
	// kStart and kEnd narrow the diagonals once a path leaves the grid.
	fStart, fEnd, bStart, bEnd := 0, 0, 0, 0
	for dd := 0; dd < maxD; dd++ {
		for k := -dd + fStart; k <= dd-fEnd; k += 2 {
			var x int
			if k == -dd || (k != dd && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1]
			} else {
				x = vf[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && d.x[a0+x] == d.y[b0+y] {
				x, y = x+1, y+1
			}
			vf[off+k] = x
			switch {
			case x > n:
				fEnd += 2
			case y > m:
				fStart += 2
			case odd:
				kb := off + delta - k
				if kb >= 0 && kb < len(vb) && vb[kb] != -1 && x >= n-vb[kb] {
					return a0 + x, b0 + y, true
				}
			}
		}
		for k := -dd + bStart; k <= dd-bEnd; k += 2 {
			var x int
			if k == -dd || (k != dd && vb[off+k-1] < vb[off+k+1]) {
				x = vb[off+k+1]
			} else {
				x = vb[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && d.x[a1-1-x] == d.y[b1-1-y] {
				x, y = x+1, y+1
			}
			vb[off+k] = x
			switch {
			case x > n:
				bEnd += 2
			case y > m:
				bStart += 2
			case !odd:
				kf := off + delta - k
				if kf >= 0 && kf < len(vf) && vf[kf] != -1 {
					fx := vf[kf]
					fy := fx - (kf - off)
					if fx >= n-x {
						return a0 + fx, b0 + fy, true
					}
				}
			}
		}
	}
	return 0, 0, false
}

// hunk is a unified diff's hunk: its header and lines.
type hunk struct {
	Header string
	Lines  []edit
}

// unified groups edits into hunks with ctx lines of context around each
// change, as diff -u does; no change, no hunk.
func unified(edits []edit, ctx int) []hunk {
	var hunks []hunk
	// aLine and bLine number the lines of a and b at edit i (from 1).
	aAt := make([]int, len(edits)+1)
	bAt := make([]int, len(edits)+1)
	aAt[0], bAt[0] = 1, 1
	for i, e := range edits {
		aAt[i+1], bAt[i+1] = aAt[i], bAt[i]
		if e.Kind != editAdd {
			aAt[i+1]++
		}
		if e.Kind != editDel {
			bAt[i+1]++
		}
	}
	for i := 0; i < len(edits); {
		if edits[i].Kind == editSame {
			i++
			continue
		}
		start := max(i-ctx, 0)
		// Extend past each change while the next comes within 2*ctx.
		end, same := i, 0
		for j := i; j < len(edits) && same <= 2*ctx; j++ {
			if edits[j].Kind == editSame {
				same++
				continue
			}
			same, end = 0, j+1
		}
		end = min(end+ctx, len(edits))
		na, nb := 0, 0
		for _, e := range edits[start:end] {
			if e.Kind != editAdd {
				na++
			}
			if e.Kind != editDel {
				nb++
			}
		}
		hunks = append(hunks, hunk{
			Header: "@@ -" + hunkRange(aAt[start], na) + " +" + hunkRange(bAt[start], nb) + " @@",
			Lines:  edits[start:end],
		})
		i = end
	}
	return hunks
}

// hunkRange is a hunk header's "start,count" (an empty range starts at
// the line before it, as diff -u writes).
func hunkRange(start, n int) string {
	if n == 0 {
		start--
	}
	if n == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(n)
}
