package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unicode/utf8"
)

// newTestOutput returns an output of capacity cap backed by a file in a
// temporary directory.
func newTestOutput(t *testing.T, cap int64) *output {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "out"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return newOutput(f, cap)
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		cap           int64
		writes        []string
		wantRetained  string
		wantTotal     int64
		wantTruncated bool
	}{
		{"empty", 10, nil, "", 0, false},
		{"under cap", 10, []string{"hello"}, "hello", 5, false},
		{"exactly cap", 5, []string{"hel", "lo"}, "hello", 5, false},
		{"over cap in one write", 5, []string{"hello world"}, "hello", 11, true},
		{"write straddles cap", 7, []string{"hello", " world"}, "hello w", 11, true},
		{"writes after cap", 3, []string{"abc", "def", "g"}, "abc", 7, true},
		{"empty writes", 3, []string{"", "ab", "", "cd"}, "abc", 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := newTestOutput(t, tt.cap)
			for _, w := range tt.writes {
				if n, err := o.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v, want %d, nil", w, n, err, len(w))
				}
			}
			o.close()
			st := o.state()
			if st.retained != int64(len(tt.wantRetained)) || st.total != tt.wantTotal || st.truncated() != tt.wantTruncated || !st.closed {
				t.Errorf("state() = retained %d, total %d, truncated %v, closed %v; want %d, %d, %v, true",
					st.retained, st.total, st.truncated(), st.closed, len(tt.wantRetained), tt.wantTotal, tt.wantTruncated)
			}
			got, next, err := o.read(0, 1<<20)
			if err != nil || string(got) != tt.wantRetained || next != int64(len(tt.wantRetained)) {
				t.Errorf("read(0, 1M) = %q, %d, %v, want %q, %d, nil", got, next, err, tt.wantRetained, len(tt.wantRetained))
			}
			b, err := os.ReadFile(o.f.Name())
			if err != nil || string(b) != tt.wantRetained {
				t.Errorf("file content = %q, %v, want %q", b, err, tt.wantRetained)
			}
		})
	}
}

// TestOutputWriteError checks that a failing output file never fails the
// command writing to it: bytes are still counted, just no longer kept.
func TestOutputWriteError(t *testing.T) {
	t.Parallel()
	o := newTestOutput(t, 100)
	if _, err := o.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	o.f.Close()
	if n, err := o.Write([]byte("defg")); n != 4 || err != nil {
		t.Fatalf("Write(%q) on a closed file = %d, %v, want 4, nil", "defg", n, err)
	}
	if n, err := o.Write([]byte("h")); n != 1 || err != nil {
		t.Fatalf("Write(%q) after a write error = %d, %v, want 1, nil", "h", n, err)
	}
	if st := o.state(); st.retained != 3 || st.total != 8 || !st.truncated() {
		t.Errorf("state() = retained %d, total %d, truncated %v; want 3, 8, true", st.retained, st.total, st.truncated())
	}
}

func TestOutputReadWindows(t *testing.T) {
	t.Parallel()
	o := newTestOutput(t, 10)
	if _, err := o.Write([]byte("0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	o.close()
	tests := []struct {
		offset, max int64
		want        string
		wantNext    int64
	}{
		{0, 4, "0123", 4},
		{4, 4, "4567", 8},
		{8, 4, "89", 10},
		{3, 1, "3", 4},
		{0, 10, "0123456789", 10},
		{0, 0, "", 0},
		{5, 0, "", 5},
		{10, 4, "", 10},
		{16, 4, "", 10}, // past the retained bytes: clamped, not an error
		{1 << 40, 4, "", 10},
	}
	for _, tt := range tests {
		got, next, err := o.read(tt.offset, tt.max)
		if err != nil || string(got) != tt.want || next != tt.wantNext {
			t.Errorf("read(%d, %d) = %q, %d, %v, want %q, %d, nil", tt.offset, tt.max, got, next, err, tt.want, tt.wantNext)
		}
	}
}

func TestOutputChanged(t *testing.T) {
	t.Parallel()
	o := newTestOutput(t, 10)
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	st := o.state()
	if closed(st.changed) {
		t.Fatal("changed is closed before any write")
	}
	o.Write([]byte("a"))
	if !closed(st.changed) {
		t.Error("changed is open after a write, want closed")
	}
	st = o.state()
	o.Write([]byte("0123456789")) // beyond the cap: still a change (total moved)
	if !closed(st.changed) {
		t.Error("changed is open after a dropped write, want closed")
	}
	st = o.state()
	o.close()
	if !closed(st.changed) {
		t.Error("changed is open after close, want closed")
	}
}

func TestLoadOutput(t *testing.T) {
	t.Parallel()
	o := newTestOutput(t, 4)
	o.Write([]byte("abcdefgh"))
	o.close()
	for _, total := range []int64{8, 0} { // 0: a record older than its file
		l, err := loadOutput(o.f, 4, total)
		if err != nil {
			t.Fatal(err)
		}
		st := l.state()
		wantTotal := max(total, 4)
		if st.retained != 4 || st.total != wantTotal || !st.closed {
			t.Errorf("loadOutput(total %d).state() = retained %d, total %d, closed %v; want 4, %d, true", total, st.retained, st.total, st.closed, wantTotal)
		}
		if b, _, err := l.read(0, 100); string(b) != "abcd" || err != nil {
			t.Errorf("loadOutput(total %d).read(0, 100) = %q, %v, want %q", total, b, err, "abcd")
		}
	}
}

func TestTrimPartialRune(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"abc", "abc"},
		{"a€", "a€"},
		{"a\xe2\x82", "a"},                       // € cut after 2 of 3 bytes
		{"a\xe2", "a"},                           // € cut after 1 byte
		{"ab\xf0\x9f\x98", "ab"},                 // 4-byte rune cut after 3
		{"ab\xf0\x9f", "ab"},                     // 4-byte rune cut after 2
		{"ab😀", "ab😀"},                           // complete 4-byte rune
		{"é", "é"},                               // complete 2-byte rune alone
		{"\xc3", ""},                             // lone lead byte: trimmed here, read keeps it
		{"\xff\xfe\x00\x01", "\xff\xfe\x00\x01"}, // binary
		{"\x80\x80\x80\x80", "\x80\x80\x80\x80"}, // continuation bytes only
		{"a\xc3\xa9\x80", "a\xc3\xa9\x80"},       // invalid but not a pending prefix
		{"\xe2\x82\xac\xe2", "€"},
	}
	for _, tt := range tests {
		if got := trimPartialRune([]byte(tt.in)); string(got) != tt.want {
			t.Errorf("trimPartialRune(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestOutputReadHoldsPartialRune checks that a reader of a stream that is
// still open never gets half a rune while more bytes may complete it, yet
// never gets nothing when bytes are there (a polling reader would spin).
func TestOutputReadHoldsPartialRune(t *testing.T) {
	t.Parallel()
	o := newTestOutput(t, 100)
	o.Write([]byte("a\xe2\x82"))
	if got, next, _ := o.read(0, 100); string(got) != "a" || next != 1 {
		t.Fatalf("open stream: read(0, 100) of %q = %q, %d, want %q, 1", "a\xe2\x82", got, next, "a")
	}
	if got, next, _ := o.read(1, 100); string(got) != "\xe2\x82" || next != 3 {
		t.Fatalf("open stream: read(1, 100) of a lone partial rune = %q, %d, want %q, 3 (never empty)", got, next, "\xe2\x82")
	}
	o.Write([]byte("\xacb"))
	if got, next, _ := o.read(1, 100); string(got) != "€b" || next != 5 {
		t.Fatalf("open stream: read(1, 100) after completion = %q, %d, want %q, 5", got, next, "€b")
	}
	// A window that ends inside a rune is trimmed even on a closed stream.
	o.Write([]byte("€"))
	o.close()
	if got, next, _ := o.read(4, 2); string(got) != "b" || next != 5 {
		t.Errorf("closed stream: read(4, 2) = %q, %d, want %q, 5", got, next, "b")
	}
	// The tail of a closed stream is returned whole, even if cut.
	o2 := newTestOutput(t, 2)
	o2.Write([]byte("€"))
	o2.close()
	if got, next, _ := o2.read(0, 100); string(got) != "\xe2\x82" || next != 2 {
		t.Errorf("closed capped stream: read(0, 100) = %q, %d, want %q, 2", got, next, "\xe2\x82")
	}
}

// TestOutputConcurrentReader follows a stream the way a streaming client
// does, while a writer appends runes split at every possible byte: the
// chunks must reassemble exactly, none may be empty while bytes remain, and
// a chunk may end inside a rune only when it holds no whole rune.
func TestOutputConcurrentReader(t *testing.T) {
	t.Parallel()
	text := bytes.Repeat([]byte("aé€😀"), 300)
	o := newTestOutput(t, int64(len(text)))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(text); {
			n := min(1+i%5, len(text)-i)
			o.Write(text[i : i+n])
			i += n
		}
		o.close()
	}()
	var got []byte
	var off int64
	for {
		st := o.state()
		b, next, err := o.read(off, 7)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case next != off+int64(len(b)):
			t.Fatalf("read(%d, 7) = %d bytes, next %d, want next %d", off, len(b), next, off+int64(len(b)))
		case len(b) == 0 && off < st.retained:
			t.Fatalf("read(%d, 7) = nothing, want bytes: %d are retained", off, st.retained)
		case off < int64(len(text)) && utf8.RuneStart(text[off]) && next < int64(len(text)) &&
			!utf8.RuneStart(text[next]) && utf8.FullRune(b):
			// Ending inside a rune is only allowed when not even one
			// whole rune was there to return.
			t.Fatalf("read(%d, 7) = %q, ends inside a rune", off, b)
		}
		got = append(got, b...)
		off = next
		if st.closed && off == st.retained {
			break
		}
		if len(b) == 0 {
			<-st.changed
		}
	}
	wg.Wait()
	if !bytes.Equal(got, text) {
		t.Errorf("reassembled stream = %d bytes, want %d bytes equal to the input", len(got), len(text))
	}
}
