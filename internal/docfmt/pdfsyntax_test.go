package docfmt

import (
	"bytes"
	"compress/zlib"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLexerObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want any
	}{
		{"42", int64(42)},
		{"-7", int64(-7)},
		{"3.5", 3.5},
		{"-.5", -0.5},
		{"true", true},
		{"null", nil},
		{"/Type", pdfName("Type")},
		{"/A#20B", pdfName("A B")},
		{"(a (nested) \\) string)", pdfString("a (nested) ) string")},
		{"<48 656c6C6f>", pdfString("Hello")},
		{"<7>", pdfString("p")},
		{"12 0 R", pdfRef{12, 0}},
		{"12 0 Rx", int64(12)},
		{"12 0", int64(12)},
		{"[1 2 0 R 3 /N]", pdfArray{int64(1), pdfRef{2, 0}, int64(3), pdfName("N")}},
		{"<</Type/Pages/Count 3/Kids[4 0 R 5 0 R]>>", pdfDict{"Type": pdfName("Pages"), "Count": int64(3), "Kids": pdfArray{pdfRef{4, 0}, pdfRef{5, 0}}}},
		{"% comment\n<< /A 1 % more\n /B [ ] >>", pdfDict{"A": int64(1), "B": pdfArray(nil)}},
		{"endobj", pdfKeyword("endobj")},
	}
	for _, tt := range tests {
		l := &lexer{buf: []byte(tt.in), eof: true}
		got, err := l.object(0)
		if err != nil {
			t.Errorf("object(%q) error: %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(pdfRef{})); diff != "" {
			t.Errorf("object(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestLexerErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"<</A>>", "<</A 1", "[1 2", "(open", "<4G>", "<<1 2>>", "]", "<</A endobj>>", "[obj]",
		strings.Repeat("[", maxNesting+2) + strings.Repeat("]", maxNesting+2),
	} {
		l := &lexer{buf: []byte(in), eof: true}
		if v, err := l.object(0); err == nil || errors.Is(err, errShort) {
			t.Errorf("object(%q) = %v, %v; want a parse error", in, v, err)
		}
	}
	// The same inputs cut short of the end of input ask for more.
	for _, in := range []string{"<</A 1", "[1 2", "(open", "12 0", "12", "<</Type /Pa", "<"} {
		l := &lexer{buf: []byte(in), eof: false}
		if v, err := l.object(0); !errors.Is(err, errShort) {
			t.Errorf("object(%q) with more to come = %v, %v; want errShort", in, v, err)
		}
	}
	// Within the nesting limit is fine.
	in := strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting)
	if _, err := (&lexer{buf: []byte(in), eof: true}).object(0); err != nil {
		t.Errorf("object of %d nested arrays: %v", maxNesting, err)
	}
}

func deflate(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zlib.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestInflateBudget(t *testing.T) {
	t.Parallel()
	z := deflate(t, make([]byte, 10000))
	budget := int64(9999)
	if _, err := inflate(z, &budget); err == nil {
		t.Error("inflating 10000 bytes with a budget of 9999 succeeded")
	}
	budget = 25000
	out, err := inflate(z, &budget)
	if err != nil || len(out) != 10000 || budget != 15000 {
		t.Errorf("inflate with a budget of 25000 = %d bytes, %v, budget left %d; want 10000, nil, 15000", len(out), err, budget)
	}
	// A stream cut short still gives what it decoded.
	budget = 25000
	if out, err := inflate(z[:len(z)-4], &budget); err != nil || len(out) != 10000 {
		t.Errorf("inflate without checksum = %d bytes, %v; want 10000, nil", len(out), err)
	}
	budget = 25000
	if _, err := inflate([]byte("not zlib"), &budget); err == nil {
		t.Error("inflating garbage succeeded")
	}
}

func TestUnpredict(t *testing.T) {
	t.Parallel()
	rows := [][]byte{{1, 2, 3}, {4, 6, 8}, {4, 6, 9}}
	want := bytes.Join(rows, nil)
	// Encode each row with each PNG filter by hand.
	enc := func(kind byte) []byte {
		var out []byte
		prev := make([]byte, 3)
		for _, r := range rows {
			out = append(out, kind)
			for i := range r {
				var left, upLeft byte
				if i > 0 {
					left, upLeft = r[i-1], prev[i-1]
				}
				switch kind {
				case 0:
					out = append(out, r[i])
				case 1:
					out = append(out, r[i]-left)
				case 2:
					out = append(out, r[i]-prev[i])
				case 3:
					out = append(out, r[i]-byte((int(left)+int(prev[i]))/2))
				case 4:
					out = append(out, r[i]-paeth(left, prev[i], upLeft))
				}
			}
			prev = r
		}
		return out
	}
	for kind := range byte(5) {
		got, err := unpredict(enc(kind), pdfDict{"Predictor": int64(12), "Columns": int64(3)})
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("unpredict with filter %d = %v, %v; want %v", kind, got, err, want)
		}
	}
	if _, err := unpredict([]byte{9, 0, 0, 0}, pdfDict{"Predictor": int64(12), "Columns": int64(3)}); err == nil {
		t.Error("unpredict accepted PNG filter type 9")
	}
	if _, err := unpredict(want, pdfDict{"Predictor": int64(2)}); err == nil {
		t.Error("unpredict accepted TIFF predictor 2")
	}
	if _, err := unpredict(want, pdfDict{"Predictor": int64(12), "Columns": int64(-1)}); err == nil {
		t.Error("unpredict accepted Columns -1")
	}
}
