package agent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestRingReadWindows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		size          int
		writes        []string
		offset, max   int64
		want          string
		wantStart     int64
		wantNext      int64
		wantTruncated bool
	}{
		{"empty", 8, nil, 0, 100, "", 0, 0, false},
		{"under size", 8, []string{"abc"}, 0, 100, "abc", 0, 3, false},
		{"from an offset", 8, []string{"abc", "de"}, 2, 100, "cde", 2, 5, false},
		{"window", 8, []string{"abcdef"}, 1, 3, "bcd", 1, 4, false},
		{"exactly full", 4, []string{"ab", "cd"}, 0, 100, "abcd", 0, 4, false},
		{"wrapped, in range", 4, []string{"abcd", "ef"}, 2, 100, "cdef", 2, 6, false},
		{"wrapped, offset dropped", 4, []string{"abcd", "ef"}, 0, 100, "cdef", 2, 6, true},
		{"wrapped window across the seam", 4, []string{"abc", "def"}, 3, 2, "de", 3, 5, false},
		{"one write larger than the ring", 4, []string{"abcdefghij"}, 0, 100, "ghij", 6, 10, true},
		{"large write after small ones", 4, []string{"ab", "cdefgh"}, 4, 100, "efgh", 4, 8, false},
		{"many wraps", 3, []string{"ab", "cd", "ef", "gh", "i"}, 6, 100, "ghi", 6, 9, false},
		{"offset at the end", 4, []string{"abcdef"}, 6, 100, "", 6, 6, false},
		{"offset past the end", 4, []string{"abcdef"}, 99, 100, "", 6, 6, false},
		{"max 0", 4, []string{"ab"}, 0, 0, "", 0, 0, false},
		{"dropped offset, max 0", 4, []string{"abcdef"}, 1, 0, "", 2, 2, true},
		{"empty writes", 4, []string{"", "ab", ""}, 0, 100, "ab", 0, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRing(tt.size)
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v, want %d, nil", w, n, err, len(w))
				}
			}
			b, start, next, truncated := r.read(tt.offset, tt.max)
			if string(b) != tt.want || start != tt.wantStart || next != tt.wantNext || truncated != tt.wantTruncated {
				t.Errorf("read(%d, %d) = %q, %d, %d, %v, want %q, %d, %d, %v", tt.offset, tt.max,
					b, start, next, truncated, tt.want, tt.wantStart, tt.wantNext, tt.wantTruncated)
			}
			if len(r.buf) > tt.size {
				t.Errorf("buffer holds %d bytes, more than the ring's size %d", len(r.buf), tt.size)
			}
		})
	}
}

// TestRingMatchesModel writes random chunks and checks every read against
// the whole stream kept aside: each offset still in the ring reads the byte
// written there, and each older one is reported truncated.
func TestRingMatchesModel(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 7, 64, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(size), 1))
			r := newRing(size)
			var all []byte
			for range 500 {
				chunk := make([]byte, rng.IntN(2*size+3))
				for i := range chunk {
					chunk[i] = byte(rng.Uint32())
				}
				r.Write(chunk)
				all = append(all, chunk...)

				total := int64(len(all))
				oldest := max(0, total-int64(size))
				offset := rng.Int64N(total + 2)
				maxBytes := rng.Int64N(int64(size) + 2)
				b, start, next, truncated := r.read(offset, maxBytes)
				wantStart := min(max(offset, oldest), total)
				wantNext := min(wantStart+maxBytes, total)
				if start != wantStart || next != wantNext || truncated != (offset < oldest) {
					t.Fatalf("after %d bytes: read(%d, %d) = start %d next %d truncated %v, want %d %d %v",
						total, offset, maxBytes, start, next, truncated, wantStart, wantNext, offset < oldest)
				}
				if !bytes.Equal(b, all[start:next]) {
					t.Fatalf("after %d bytes: read(%d, %d) returned other bytes than were written there", total, offset, maxBytes)
				}
				if st := r.state(); st.total != total {
					t.Fatalf("state().total = %d, want %d", st.total, total)
				}
			}
		})
	}
}

// TestRingGrowsLazily checks that a ring holds memory for what was
// written, not its size.
func TestRingGrowsLazily(t *testing.T) {
	t.Parallel()
	r := newRing(1 << 20)
	r.Write([]byte("prompt$ "))
	if c := cap(r.buf); c > 4096 {
		t.Errorf("after 8 bytes the 1 MiB ring holds %d bytes, want at most 4096", c)
	}
	r.Write(make([]byte, 3<<20))
	if c := cap(r.buf); c != 1<<20 {
		t.Errorf("after 3 MiB the 1 MiB ring holds %d bytes, want %d", c, 1<<20)
	}
}

// TestRingWakesReaders checks that a reader waiting on changed wakes at a
// write and at close, and sees the bytes and the end.
func TestRingWakesReaders(t *testing.T) {
	t.Parallel()
	r := newRing(16)
	st := r.state()
	var wg sync.WaitGroup
	wg.Go(func() { r.Write([]byte("hi")) })
	select {
	case <-st.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("a write did not wake the reader")
	}
	wg.Wait()
	if b, _, _, _ := r.read(0, 16); string(b) != "hi" {
		t.Errorf("read after the wake = %q, want %q", b, "hi")
	}
	st = r.state()
	r.close()
	select {
	case <-st.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not wake the reader")
	}
	if st := r.state(); !st.closed || st.total != 2 {
		t.Errorf("state() after close = total %d closed %v, want 2 true", st.total, st.closed)
	}
}
