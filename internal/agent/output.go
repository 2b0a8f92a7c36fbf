package agent

import (
	"io"
	"os"
	"sync"
	"unicode/utf8"
)

// output retains the first cap bytes a command writes to one stream, in a
// file in the agent's state directory, and counts the rest as dropped.
// Keeping the head (not a ring) keeps byte offsets stable forever, which is
// what reconnecting readers rely on.
type output struct {
	f   *os.File
	cap int64

	// mu guards the fields below.
	mu       sync.Mutex
	retained int64 // bytes in f
	total    int64 // bytes the command wrote
	closed   bool  // no more writes will come
	changed  chan struct{}
	writeErr error
}

func newOutput(f *os.File, cap int64) *output {
	return &output{f: f, cap: cap, changed: make(chan struct{})}
}

// loadOutput reopens a finished stream from disk.
func loadOutput(f *os.File, cap, total int64) (*output, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	o := newOutput(f, cap)
	o.retained = st.Size()
	o.total = max(total, st.Size())
	o.closed = true
	return o, nil
}

// Write appends p, keeping at most cap bytes. It never fails the writer:
// a command must not die because its output is being dropped.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total += int64(len(p))
	if room := o.cap - o.retained; room > 0 && o.writeErr == nil {
		keep := p[:min(int64(len(p)), room)]
		n, err := o.f.WriteAt(keep, o.retained)
		o.retained += int64(n)
		o.writeErr = err
	}
	o.notifyLocked()
	return len(p), nil
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.notifyLocked()
}

func (o *output) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// outputState is a consistent view of a stream's counters.
type outputState struct {
	retained, total int64
	closed          bool
	changed         <-chan struct{}
}

func (o *output) state() outputState {
	o.mu.Lock()
	defer o.mu.Unlock()
	return outputState{o.retained, o.total, o.closed, o.changed}
}

func (s outputState) truncated() bool { return s.total > s.retained }

// read returns up to max retained bytes from offset. When the stream may
// still grow, a trailing incomplete UTF-8 sequence is held back so text
// readers never see a rune split across two reads.
func (o *output) read(offset, max int64) ([]byte, int64, error) {
	st := o.state()
	offset = min(offset, st.retained)
	n := min(st.retained-offset, max)
	if n <= 0 {
		return nil, offset, nil
	}
	buf := make([]byte, n)
	if _, err := o.f.ReadAt(buf, offset); err != nil && err != io.EOF {
		return nil, offset, err
	}
	if !st.closed || n == max {
		if t := trimPartialRune(buf); len(t) > 0 {
			buf = t // never return nothing when bytes are there: readers would spin
		}
	}
	return buf, offset + int64(len(buf)), nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, if the
// rest is otherwise a valid prefix of one. Binary output is left alone.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
