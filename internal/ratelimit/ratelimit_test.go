package ratelimit

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var _ flag.Value = (*Rate)(nil)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// checkHeap fails t unless l's map and heap agree and the heap is ordered.
func checkHeap(t *testing.T, l *Limiter) {
	t.Helper()
	if len(l.heap) != len(l.buckets) || len(l.heap) > l.maxKeys {
		t.Fatalf("len(heap) = %d, len(buckets) = %d, maxKeys = %d", len(l.heap), len(l.buckets), l.maxKeys)
	}
	for i, b := range l.heap {
		if b.i != i || l.buckets[b.key] != b {
			t.Fatalf("heap[%d] = {key %q, i %d}: not indexed as such", i, b.key, b.i)
		}
		if p := (i - 1) / 2; i > 0 && l.heap[p].full > b.full {
			t.Fatalf("heap[%d].full = %d > heap[%d].full = %d", p, l.heap[p].full, i, b.full)
		}
	}
}

func TestAllow(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		key     string
		ok      bool
		retry   time.Duration
	}
	tests := []struct {
		name  string
		rate  Rate
		steps []step
	}{
		{
			name: "burst then refusal then refill",
			rate: Rate{PerSecond: 1, Burst: 3},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", false, time.Second},
				{500 * time.Millisecond, "a", false, 500 * time.Millisecond},
				{500 * time.Millisecond, "a", true, 0},
				{0, "a", false, time.Second},
				{time.Hour, "a", true, 0}, // refills to Burst, not beyond
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", false, time.Second},
			},
		},
		{
			name: "keys are independent",
			rate: Rate{PerSecond: 1, Burst: 1},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", false, time.Second},
				{0, "b", true, 0},
				{0, "b", false, time.Second},
				{time.Second, "a", true, 0},
			},
		},
		{
			name: "retry after is to the nanosecond",
			rate: Rate{PerSecond: 10, Burst: 1},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", false, 100 * time.Millisecond},
				{99 * time.Millisecond, "a", false, time.Millisecond},
				{time.Millisecond - 1, "a", false, 1},
				{1, "a", true, 0},
			},
		},
		{
			name: "slower than one a second",
			rate: Rate{PerSecond: 0.5, Burst: 1},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", false, 2 * time.Second},
				{2 * time.Second, "a", true, 0},
			},
		},
		{
			name: "default burst is one second's worth, rounded up",
			rate: Rate{PerSecond: 2.5},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", false, 400 * time.Millisecond},
			},
		},
		{
			name: "default burst is at least 1",
			rate: Rate{PerSecond: 0.1},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", false, 10 * time.Second},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			l := newLimiter(tt.rate, 10, clk.Now)
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				ok, retry := l.Allow(s.key)
				if ok != s.ok || retry != s.retry {
					t.Errorf("step %d: Allow(%q) = %v, %v, want %v, %v", i, s.key, ok, retry, s.ok, s.retry)
				}
			}
			checkHeap(t, l)
		})
	}
}

func TestUnlimited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rate Rate
		want int // allowed out of 1000 at one instant
	}{
		{"zero", Rate{}, 1000},
		{"zero with burst", Rate{Burst: 5}, 1000},
		{"negative", Rate{PerSecond: -1}, 1000},
		{"infinite", Rate{PerSecond: math.Inf(1)}, 1000},
		{"faster than 1/ns", Rate{PerSecond: 2e9}, 1000},
		{"NaN", Rate{PerSecond: math.NaN()}, 1000},
		// Positive control: the same probe against a real limit.
		{"limited", Rate{PerSecond: 1, Burst: 7}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(tt.rate, 10, newClock().Now)
			got := 0
			for range 1000 {
				ok, retry := l.Allow("a")
				if ok {
					got++
					if retry != 0 {
						t.Fatalf("Allow = true, %v, want retry 0", retry)
					}
				}
			}
			if got != tt.want {
				t.Errorf("allowed %d of 1000, want %d", got, tt.want)
			}
			if unlimited := tt.want == 1000; unlimited && len(l.buckets) != 0 {
				t.Errorf("unlimited Limiter tracks %d keys, want 0", len(l.buckets))
			}
		})
	}
}

func TestNewPanicsOnNoKeys(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New(_, 0) did not panic")
		}
	}()
	New(Rate{PerSecond: 1}, 0)
}

func TestMemoryBound(t *testing.T) {
	t.Parallel()
	clk := newClock()
	l := newLimiter(Rate{PerSecond: 1, Burst: 2}, 100, clk.Now)
	for i := range 10_000 {
		l.Allow(fmt.Sprint("k", i))
		if i%7 == 0 {
			clk.Advance(100 * time.Millisecond)
		}
	}
	if len(l.buckets) != 100 {
		t.Errorf("tracked keys = %d, want 100", len(l.buckets))
	}
	checkHeap(t, l)
}

// TestEviction checks which bucket is forgotten when the table is full, and
// so whether a throttled key "x" can get free by making others tracked.
func TestEviction(t *testing.T) {
	t.Parallel()
	rate := Rate{PerSecond: 1, Burst: 5}
	drain := func(l *Limiter, key string) {
		for range rate.Burst {
			l.Allow(key)
		}
	}
	tests := []struct {
		name    string
		maxKeys int
		run     func(l *Limiter, clk *fakeClock)
		kept    []string
		gone    []string
		xFree   bool // whether x's next request is allowed
	}{
		{
			name:    "full bucket goes before a throttled one",
			maxKeys: 2,
			run: func(l *Limiter, clk *fakeClock) {
				l.Allow("full") // full again after 1s
				clk.Advance(2 * time.Second)
				drain(l, "x")
				l.Allow("new")
			},
			kept: []string{"x", "new"},
			gone: []string{"full"},
		},
		{
			name:    "with none full, the one owing least goes",
			maxKeys: 3,
			run: func(l *Limiter, clk *fakeClock) {
				l.Allow("owes3")
				l.Allow("owes3")
				l.Allow("owes3")
				drain(l, "x")
				l.Allow("owes1")
				l.Allow("new")
			},
			kept: []string{"x", "owes3", "new"},
			gone: []string{"owes1"},
		},
		{
			name:    "flood of fresh keys does not free x",
			maxKeys: 10,
			run: func(l *Limiter, clk *fakeClock) {
				drain(l, "x")
				for i := range 1000 {
					l.Allow(fmt.Sprint("flood", i))
				}
			},
			kept: []string{"x"},
		},
		{
			name:    "flood of fresh keys frees x when there is no room for two",
			maxKeys: 1,
			run: func(l *Limiter, clk *fakeClock) {
				drain(l, "x")
				l.Allow("flood")
			},
			gone:  []string{"x"},
			xFree: true,
		},
		{
			// The documented limit: maxKeys keys each drained after x.
			name:    "flood of keys drained after x frees x",
			maxKeys: 10,
			run: func(l *Limiter, clk *fakeClock) {
				drain(l, "x")
				clk.Advance(time.Millisecond)
				for i := range 10 {
					drain(l, fmt.Sprint("flood", i))
				}
			},
			gone:  []string{"x"},
			xFree: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			l := newLimiter(rate, tt.maxKeys, clk.Now)
			tt.run(l, clk)
			checkHeap(t, l)
			for _, k := range tt.kept {
				if l.buckets[k] == nil {
					t.Errorf("%q forgotten, want kept", k)
				}
			}
			for _, k := range tt.gone {
				if l.buckets[k] != nil {
					t.Errorf("%q kept, want forgotten", k)
				}
			}
			if ok, _ := l.Allow("x"); ok != tt.xFree {
				t.Errorf("Allow(x) = %v, want %v", ok, tt.xFree)
			}
		})
	}
}

// TestModel runs random requests against a Limiter and an independent
// integer token bucket, and checks that they agree and that each forgotten
// key was one closest to full.
func TestModel(t *testing.T) {
	t.Parallel()
	const (
		maxKeys = 8
		perSec  = 2
		burst   = 3
		milli   = 1000 // model tokens are in thousandths
	)
	type state struct {
		tokens int // thousandths of a token
		at     time.Duration
	}
	clk := newClock()
	l := newLimiter(Rate{PerSecond: perSec, Burst: burst}, maxKeys, clk.Now)
	model := map[string]*state{}
	var now time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20_000 {
		d := time.Duration(rng.IntN(300)) * time.Millisecond
		clk.Advance(d)
		now += d
		key := fmt.Sprint("k", rng.IntN(20))

		before := map[string]int64{}
		for k, b := range l.buckets {
			before[k] = b.full
		}
		ok, retry := l.Allow(key)

		s := model[key]
		if s == nil {
			s = &state{tokens: burst * milli, at: now}
			model[key] = s
		}
		s.tokens = min(burst*milli, s.tokens+int(now-s.at)/int(time.Millisecond)*perSec)
		s.at = now
		wantOK, wantRetry := s.tokens >= milli, time.Duration(0)
		if wantOK {
			s.tokens -= milli
		} else {
			wantRetry = time.Duration((milli-s.tokens)/perSec) * time.Millisecond
		}
		if ok != wantOK || retry != wantRetry {
			t.Fatalf("op %d: Allow(%q) = %v, %v, want %v, %v", i, key, ok, retry, wantOK, wantRetry)
		}

		checkHeap(t, l)
		if _, tracked := before[key]; tracked || len(before) < maxKeys {
			continue
		}
		least := int64(math.MaxInt64)
		for _, full := range before {
			least = min(least, full)
		}
		for k, full := range before {
			if l.buckets[k] == nil {
				if full != least {
					t.Fatalf("op %d: forgot %q, full at %d, but another is full at %d", i, k, full, least)
				}
				delete(model, k)
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	clk := newClock() // frozen: exactly Burst requests of "k" may pass
	l := newLimiter(Rate{PerSecond: 1, Burst: 10}, 4, clk.Now)
	f := &Failures{l: newLimiter(Rate{PerSecond: 1, Burst: 10}, 4, clk.Now)}
	// Owing two tokens, "k" is never closest to full among churn keys that
	// take one each, so it is never forgotten.
	l.Allow("k")
	l.Allow("k")
	f.Failed("k")
	f.Failed("k")
	allowed := atomic.Int64{}
	allowed.Add(2)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if ok, _ := l.Allow("k"); ok {
					allowed.Add(1)
				}
				l.Allow(fmt.Sprint("churn", g, "-", i))
				f.Failed("k")
				f.Failed(fmt.Sprint("churn", g, "-", i))
				f.Blocked("k")
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 10 {
		t.Errorf("allowed %d requests of k, want 10", got)
	}
	if blocked, _ := f.Blocked("k"); !blocked {
		t.Error("Blocked(k) = false after 1600 failures, want true")
	}
	checkHeap(t, l)
	checkHeap(t, f.l)
}

func TestFailures(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		fail    string // key to call Failed on, if any
		check   string // key to call Blocked on
		blocked bool
		retry   time.Duration
	}
	tests := []struct {
		name  string
		rate  string
		steps []step
	}{
		{
			name: "three a minute",
			rate: "3/m",
			steps: []step{
				{check: "a"},
				{fail: "a", check: "a"},
				{fail: "a", check: "a"},
				{fail: "a", check: "a", blocked: true, retry: 20 * time.Second},
				// Checking takes nothing.
				{check: "a", blocked: true, retry: 20 * time.Second},
				{check: "a", blocked: true, retry: 20 * time.Second},
				{check: "b"},
				// Failing while blocked does not extend the block.
				{advance: 10 * time.Second, fail: "a", check: "a", blocked: true, retry: 10 * time.Second},
				{advance: 10 * time.Second, check: "a"},
				{fail: "a", check: "a", blocked: true, retry: 20 * time.Second},
			},
		},
		{
			name: "off",
			rate: "off",
			steps: []step{
				{fail: "a", check: "a"},
				{fail: "a", check: "a"},
				{fail: "a", check: "a"},
				{fail: "a", check: "a"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRate(tt.rate)
			if err != nil {
				t.Fatal(err)
			}
			clk := newClock()
			f := &Failures{l: newLimiter(r, 10, clk.Now)}
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				if s.fail != "" {
					f.Failed(s.fail)
				}
				blocked, retry := f.Blocked(s.check)
				if blocked != s.blocked || retry != s.retry {
					t.Errorf("step %d: Blocked(%q) = %v, %v, want %v, %v", i, s.check, blocked, retry, s.blocked, s.retry)
				}
			}
		})
	}
}

func TestBlockedDoesNotTrack(t *testing.T) {
	t.Parallel()
	f := NewFailures(Rate{PerSecond: 1}, 10)
	for i := range 100 {
		f.Blocked(fmt.Sprint("k", i))
	}
	if n := len(f.l.buckets); n != 0 {
		t.Errorf("after Blocked only, %d keys tracked, want 0", n)
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrusted([]string{"10.0.0.0/8", "192.168.1.1", "fd00::/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string // "" for the zero Addr
	}{
		{"untrusted peer", "203.0.113.9:5000", nil, trusted, "203.0.113.9"},
		{"untrusted peer, spoofed header ignored", "203.0.113.9:5000", []string{"1.2.3.4"}, trusted, "203.0.113.9"},
		{"positive control: same header via trusted proxy", "10.0.0.5:5000", []string{"1.2.3.4"}, trusted, "1.2.3.4"},
		{"no trusted proxies", "10.0.0.5:5000", []string{"1.2.3.4"}, nil, "10.0.0.5"},
		{"trusted proxy, no header", "10.0.0.5:5000", nil, trusted, "10.0.0.5"},
		{"client's own entries left of the proxy's are ignored", "10.0.0.5:5000", []string{"6.6.6.6, 203.0.113.7"}, trusted, "203.0.113.7"},
		{"chain of trusted proxies", "10.0.0.5:5000", []string{"6.6.6.6, 203.0.113.7, 192.168.1.1, 10.1.2.3"}, trusted, "203.0.113.7"},
		{"several header values", "10.0.0.5:5000", []string{"6.6.6.6, 203.0.113.7", "192.168.1.1", "10.1.1.1"}, trusted, "203.0.113.7"},
		{"all trusted: leftmost hop", "10.0.0.5:5000", []string{"10.9.9.9, 10.8.8.8"}, trusted, "10.9.9.9"},
		{"spaces and tabs", "10.0.0.5:5000", []string{" 203.0.113.7 ,\t10.1.1.1\t"}, trusted, "203.0.113.7"},
		{"malformed rightmost: peer", "10.0.0.5:5000", []string{"203.0.113.7, garbage"}, trusted, "10.0.0.5"},
		{"malformed after trusted hop: that hop", "10.0.0.5:5000", []string{"garbage, 10.1.1.1"}, trusted, "10.1.1.1"},
		{"malformed past the client: ignored", "10.0.0.5:5000", []string{"garbage, 203.0.113.7"}, trusted, "203.0.113.7"},
		{"empty entry: peer", "10.0.0.5:5000", []string{"203.0.113.7,"}, trusted, "10.0.0.5"},
		{"empty header value: peer", "10.0.0.5:5000", []string{"203.0.113.7", ""}, trusted, "10.0.0.5"},
		{"unknown: peer", "10.0.0.5:5000", []string{"unknown"}, trusted, "10.0.0.5"},
		{"entry with port", "10.0.0.5:5000", []string{"203.0.113.7:4711"}, trusted, "203.0.113.7"},
		{"IPv6 entry with port", "10.0.0.5:5000", []string{"[2001:db8::1]:80"}, trusted, "2001:db8::1"},
		{"IPv6 peer", "[2001:db8::2]:443", []string{"1.2.3.4"}, trusted, "2001:db8::2"},
		{"IPv6 trusted proxy", "[fd00::1]:443", []string{"2001:db8::9, fd12::3"}, trusted, "2001:db8::9"},
		{"IPv6 loopback proxy, IPv4 client", "[::1]:443", []string{"203.0.113.7"}, trusted, "203.0.113.7"},
		{"mapped trusted peer", "[::ffff:10.0.0.5]:80", []string{"203.0.113.7"}, trusted, "203.0.113.7"},
		{"mapped untrusted peer", "[::ffff:203.0.113.9]:80", []string{"1.2.3.4"}, trusted, "203.0.113.9"},
		{"mapped entry", "10.0.0.5:5000", []string{"::ffff:203.0.113.7"}, trusted, "203.0.113.7"},
		{"mapped trusted entry", "10.0.0.5:5000", []string{"203.0.113.7, ::ffff:10.1.1.1"}, trusted, "203.0.113.7"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, trusted, "fe80::1"},
		{"bare IP", "203.0.113.9", nil, trusted, "203.0.113.9"},
		{"unix socket", "@", []string{"1.2.3.4"}, trusted, ""},
		{"empty", "", nil, trusted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var want netip.Addr
			if tt.want != "" {
				want = netip.MustParseAddr(tt.want)
			}
			if got := ClientAddr(tt.remote, tt.xff, tt.trusted); got != want {
				t.Errorf("ClientAddr(%q, %q) = %v, want %v", tt.remote, tt.xff, got, want)
			}
		})
	}
}

func TestParseTrusted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      []string
		want    string // prefixes joined by " "
		wantErr string
	}{
		{in: nil, want: ""},
		{in: []string{"10.0.0.0/8", "fd00::/8"}, want: "10.0.0.0/8 fd00::/8"},
		{in: []string{"10.1.2.3/8"}, want: "10.0.0.0/8"},
		{in: []string{" 192.168.1.1 ", "", "::1"}, want: "192.168.1.1/32 ::1/128"},
		{in: []string{"::ffff:10.0.0.0/104"}, want: "10.0.0.0/8"},
		{in: []string{"::ffff:1.2.3.4"}, want: "1.2.3.4/32"},
		{in: []string{"10.0.0.0/33"}, wantErr: `trusted proxy "10.0.0.0/33"`},
		{in: []string{"10.0.0.1", "nope"}, wantErr: `trusted proxy "nope": want an IP address or CIDR prefix`},
		{in: []string{"10.0.0.256"}, wantErr: `trusted proxy "10.0.0.256"`},
		{in: []string{"fe80::1%eth0"}, wantErr: `trusted proxy "fe80::1%eth0": zones are not allowed`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.in, ","), func(t *testing.T) {
			t.Parallel()
			got, err := ParseTrusted(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("ParseTrusted(%q) = _, %v, want error %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTrusted(%q) = _, %v", tt.in, err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if g := strings.Join(s, " "); g != tt.want {
				t.Errorf("ParseTrusted(%q) = %s, want %s", tt.in, g, tt.want)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   Rate
		str    string // want.String()
		errMsg string
	}{
		{in: "20/s", want: Rate{20, 20}, str: "20/s"},
		{in: "600/m", want: Rate{10, 600}, str: "10/s:600"},
		{in: "1/h", want: Rate{1.0 / 3600, 1}, str: "1/h"},
		{in: "5/s:10", want: Rate{5, 10}, str: "5/s:10"},
		{in: "10/m", want: Rate{10.0 / 60, 10}, str: "10/m"},
		{in: "0.5/s", want: Rate{0.5, 1}, str: "30/m:1"},
		{in: "2.5/s", want: Rate{2.5, 3}, str: "150/m:3"},
		{in: " 20/s ", want: Rate{20, 20}, str: "20/s"},
		{in: "1000000000/s", want: Rate{1e9, 1e9}, str: "1000000000/s"},
		{in: "0", want: Rate{}, str: "off"},
		{in: "off", want: Rate{}, str: "off"},
		{in: "OFF", want: Rate{}, str: "off"},
		{in: "", errMsg: `rate "": want N/s, N/m or N/h, optionally :burst`},
		{in: "20", errMsg: `rate "20": want N/s, N/m or N/h, optionally :burst`},
		{in: "20/d", errMsg: `rate "20/d": want N/s`},
		{in: "20/sec", errMsg: `rate "20/sec": want N/s`},
		{in: "/s", errMsg: `rate "/s": want N/s`},
		{in: "x/s", errMsg: `rate "x/s": want N/s`},
		{in: "-1/s", errMsg: `rate "-1/s": want N/s`},
		{in: "+1/s", errMsg: `rate "+1/s": want N/s`},
		{in: "1e3/s", errMsg: `rate "1e3/s": want N/s`},
		{in: "inf/s", errMsg: `rate "inf/s": want N/s`},
		{in: "1..2/s", errMsg: `rate "1..2/s": want N/s`},
		{in: "./s", errMsg: `rate "./s": want N/s`},
		{in: "0/s", errMsg: `rate "0/s": count must be positive (use "off" for no limit)`},
		{in: "0.0/m", errMsg: `rate "0.0/m": count must be positive`},
		{in: "2000000000/s", errMsg: `rate "2000000000/s": count above 1e+09`},
		{in: "20/s:", errMsg: `rate "20/s:": burst "" must be a positive integer`},
		{in: "20/s:0", errMsg: `rate "20/s:0": burst "0" must be a positive integer`},
		{in: "20/s:-1", errMsg: `rate "20/s:-1": burst "-1" must be`},
		{in: "20/s:+1", errMsg: `rate "20/s:+1": burst "+1" must be`},
		{in: "20/s:1.5", errMsg: `rate "20/s:1.5": burst "1.5" must be`},
		{in: "20/s:10:5", errMsg: `rate "20/s:10:5": burst "10:5" must be`},
		{in: "20/s:99999999999999999999", errMsg: `rate "20/s:99999999999999999999": burst`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRate(tt.in)
			if tt.errMsg != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.errMsg) {
					t.Errorf("ParseRate(%q) = %+v, %v, want error %q", tt.in, got, err, tt.errMsg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRate(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			}
			if s := got.String(); s != tt.str {
				t.Errorf("%+v.String() = %q, want %q", got, s, tt.str)
			}
			if back, err := ParseRate(got.String()); err != nil || back != got {
				t.Errorf("ParseRate(%q) = %+v, %v, want %+v", got.String(), back, err, got)
			}
		})
	}
}

func TestRateFlag(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	r := Rate{PerSecond: 20}
	fs.Var(&r, "rate", "")
	if err := fs.Parse([]string{"-rate=5/s:10"}); err != nil || r != (Rate{5, 10}) {
		t.Errorf("-rate=5/s:10: r = %+v, err = %v, want {5 10}, nil", r, err)
	}
	if err := fs.Parse([]string{"-rate=5"}); err == nil {
		t.Error("-rate=5: err = nil, want an error")
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"20/s", "600/m", "1/h", "5/s:10", "0.5/s", "off", "0", "7/m:3", "0.0001/h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Errorf("ParseRate(%q) = %+v; ParseRate(%q) = %+v, %v", s, r, r.String(), back, err)
		}
	})
}

func FuzzClientAddr(f *testing.F) {
	trusted, err := ParseTrusted([]string{"10.0.0.0/8", "fd00::/8", "::1"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("10.0.0.5:80", "6.6.6.6, 203.0.113.7, 10.1.1.1")
	f.Add("[::ffff:10.0.0.5]:80", "::ffff:1.2.3.4, [fd00::1]:5")
	f.Add("203.0.113.9:80", "1.2.3.4")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		got := ClientAddr(remote, []string{xff}, trusted)
		peer, ok := parseAddr(remote)
		if !ok {
			if got.IsValid() {
				t.Errorf("ClientAddr(%q, %q) = %v, want the zero Addr", remote, xff, got)
			}
			return
		}
		if !isTrusted(peer, trusted) && got != peer {
			t.Errorf("ClientAddr(%q, %q) = %v, want untrusted peer %v", remote, xff, got, peer)
		}
		if got.Is4In6() || got.Zone() != "" {
			t.Errorf("ClientAddr(%q, %q) = %v, want unmapped and without zone", remote, xff, got)
		}
		inHeader := false
		for _, e := range strings.Split(xff, ",") {
			if a, ok := parseAddr(strings.TrimSpace(e)); ok && a == got {
				inHeader = true
			}
		}
		if got != peer && !inHeader {
			t.Errorf("ClientAddr(%q, %q) = %v, neither the peer nor in the header", remote, xff, got)
		}
	})
}

func BenchmarkAllow(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String()
	}
	rate := Rate{PerSecond: 1e6, Burst: 1e6}
	// floor is what any mutex-guarded map of keys costs: the clock, the
	// lock and a lookup.
	b.Run("floor", func(b *testing.B) {
		var mu sync.Mutex
		m := map[string]int64{keys[0]: 0}
		epoch := time.Now()
		for b.Loop() {
			now := int64(time.Since(epoch))
			mu.Lock()
			m[keys[0]] = max(m[keys[0]], now) + 1
			mu.Unlock()
		}
	})
	b.Run("one key", func(b *testing.B) {
		l := New(rate, 1024)
		for b.Loop() {
			l.Allow(keys[0])
		}
	})
	b.Run("1024 keys", func(b *testing.B) {
		l := New(rate, 1024)
		i := 0
		for b.Loop() {
			l.Allow(keys[i%1024])
			i++
		}
	})
	b.Run("evicting", func(b *testing.B) {
		l := New(rate, 1024)
		i := 0
		for b.Loop() {
			l.Allow(keys[i%len(keys)])
			i++
		}
	})
	b.Run("throttled", func(b *testing.B) {
		l := New(Rate{PerSecond: 1, Burst: 1}, 1024)
		for b.Loop() {
			l.Allow(keys[0])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := New(rate, 1024)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				l.Allow(keys[i%1024])
				i++
			}
		})
	})
}
