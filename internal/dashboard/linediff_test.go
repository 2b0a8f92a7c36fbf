package dashboard

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lcsLen is the length of a longest common subsequence of a and b, by
// the textbook dynamic program: the minimal diff has len(a)+len(b)-2·lcs
// edits.
func lcsLen(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(cur[j], prev[j+1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkDiff checks that edits turn a into b and are as few as can be.
func checkDiff(t *testing.T, a, b []string, edits []edit) {
	t.Helper()
	var gotA, gotB []string
	changes := 0
	for _, e := range edits {
		if e.Kind != editAdd {
			gotA = append(gotA, e.Line)
		}
		if e.Kind != editDel {
			gotB = append(gotB, e.Line)
		}
		if e.Kind != editSame {
			changes++
		}
	}
	if diff := cmp.Diff(a, gotA, cmp.Comparer(func(x, y []string) bool { return strings.Join(x, "\n") == strings.Join(y, "\n") })); diff != "" {
		t.Fatalf("diffLines(%q, %q): the edits' a differs (-want +got):\n%s", a, b, diff)
	}
	if strings.Join(gotB, "\n") != strings.Join(b, "\n") {
		t.Fatalf("diffLines(%q, %q): the edits' b = %q", a, b, gotB)
	}
	if want := len(a) + len(b) - 2*lcsLen(a, b); changes != want {
		t.Fatalf("diffLines(%q, %q) = %d changes, want %d (minimal)", a, b, changes, want)
	}
}

func TestDiffLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, a, b string }{
		{"empty", "", ""},
		{"same", "a\nb\nc", "a\nb\nc"},
		{"added", "a\nc", "a\nb\nc"},
		{"removed", "a\nb\nc", "a\nc"},
		{"replaced", "a\nb\nc", "a\nx\nc"},
		{"all new", "", "x\ny"},
		{"all gone", "x\ny", ""},
		{"different", "a\nb\nc", "x\ny"},
		{"classic", "a\nb\nc\na\nb\nb\na", "c\nb\na\nb\na\nc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := splitLines(tc.a), splitLines(tc.b)
			checkDiff(t, a, b, diffLines(a, b))
		})
	}
	// Random small files over a small alphabet: many repeated lines, the
	// hard case for a split.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		gen := func() []string {
			n := rng.IntN(12)
			ls := make([]string, n)
			for i := range ls {
				ls[i] = string(rune('a' + rng.IntN(4)))
			}
			return ls
		}
		a, b := gen(), gen()
		checkDiff(t, a, b, diffLines(a, b))
	}
}

func TestUnified(t *testing.T) {
	t.Parallel()
	var a, b []string
	for i := range 20 {
		a = append(a, "line "+string(rune('a'+i)))
	}
	b = append(b, a...)
	b[2] = "changed"               // a hunk at the start
	b = append(b[:15], b[16:]...)  // a line gone near the end
	b = append(b, "new last line") // and one added: the same hunk
	hunks := unified(diffLines(a, b), 3)
	var headers []string
	for _, h := range hunks {
		headers = append(headers, h.Header)
	}
	want := []string{"@@ -1,6 +1,6 @@", "@@ -13,8 +13,8 @@"}
	if diff := cmp.Diff(want, headers); diff != "" {
		t.Errorf("hunk headers (-want +got):\n%s", diff)
	}
	if got := unified(diffLines(a, a), 3); len(got) != 0 {
		t.Errorf("unified(same) = %d hunks, want none", len(got))
	}
}

// TestDiffLinesLarge diffs two files that share no line, the worst case
// (the longest edit script), at a fifth of the page's bound so that the
// race detector's pass stays short, and checks the result is a diff.
func TestDiffLinesLarge(t *testing.T) {
	t.Parallel()
	n := maxDiffLines / 5
	a := make([]string, n)
	b := make([]string, n)
	for i := range a {
		a[i] = "a" + string(rune(i))
		b[i] = "b" + string(rune(i))
	}
	edits := diffLines(a, b)
	if len(edits) != 2*n {
		t.Fatalf("diffLines of two unrelated files = %d edits, want %d", len(edits), 2*n)
	}
}
