package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rate is how fast a bucket refills and how many tokens it holds.
//
// PerSecond <= 0 means unlimited, as does a rate above one per nanosecond.
// Burst < 1 means the default for code-built rates: one second's worth of
// tokens rounded up, at least 1. ParseRate sets Burst itself.
type Rate struct {
	PerSecond float64
	Burst     int
}

// maxCount bounds the N of "N/s": faster than that is "off" in practice, and
// the bound keeps the default burst well inside an int.
const maxCount = 1e9

var units = []struct {
	name    string
	seconds float64
}{{"s", 1}, {"m", 60}, {"h", 3600}}

// ParseRate parses a rate flag: "N/s", "N/m" or "N/h", optionally followed
// by ":burst", or "0" or "off" for unlimited. N may have a fraction ("0.5/s").
//
// Without ":burst" the burst is N rounded up, at least 1: the unit names the
// window whose whole allowance a client may spend at once. So "20/s" allows
// 20 requests at once and then 20 a second, "600/m" allows 600 at once and
// then 10 a second, and "1/h" allows one request an hour.
func ParseRate(s string) (Rate, error) {
	t := strings.TrimSpace(s)
	if t == "0" || strings.EqualFold(t, "off") {
		return Rate{}, nil
	}
	spec, burst, hasBurst := strings.Cut(t, ":")
	count, unit, ok := strings.Cut(spec, "/")
	seconds := 0.0
	for _, u := range units {
		if unit == u.name {
			seconds = u.seconds
		}
	}
	if !ok || seconds == 0 || !isDecimal(count) {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m or N/h, optionally :burst", s)
	}
	n, err := strconv.ParseFloat(count, 64)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: %w", s, err)
	}
	if n <= 0 {
		return Rate{}, fmt.Errorf("rate %q: count must be positive (use \"off\" for no limit)", s)
	}
	if n > maxCount {
		return Rate{}, fmt.Errorf("rate %q: count above %g (use \"off\" for no limit)", s, float64(maxCount))
	}
	r := Rate{PerSecond: n / seconds, Burst: max(1, int(math.Ceil(n)))}
	if hasBurst {
		b, err := strconv.Atoi(burst)
		if err != nil || b < 1 || !isDecimal(burst) || strings.Contains(burst, ".") {
			return Rate{}, fmt.Errorf("rate %q: burst %q must be a positive integer", s, burst)
		}
		r.Burst = b
	}
	return r, nil
}

// isDecimal reports whether s is digits with at most one '.' among them,
// which is stricter than strconv.ParseFloat ("1e3", "+1", "Inf", "0x1p3").
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for _, c := range []byte(s) {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

func (r Rate) unlimited() bool {
	return !(r.PerSecond > 0) || r.PerSecond > maxCount
}

// String formats r so that ParseRate reads it back: "off", or the count in
// the shortest unit in which it is whole, with ":burst" unless it is the
// default for that count.
func (r Rate) String() string {
	if r.unlimited() {
		return "off"
	}
	count, unit := strconv.FormatFloat(r.PerSecond, 'f', -1, 64), "s"
	n := r.PerSecond
	for _, u := range units {
		v := math.Round(r.PerSecond * u.seconds)
		if v >= 1 && v/u.seconds == r.PerSecond {
			count, unit, n = strconv.FormatFloat(v, 'f', -1, 64), u.name, v
			break
		}
	}
	s := count + "/" + unit
	burst := r.Burst
	if burst < 1 {
		burst = defaultBurst(r.PerSecond)
	}
	if burst != max(1, int(math.Ceil(n))) {
		s += ":" + strconv.Itoa(burst)
	}
	return s
}

// Set parses s with ParseRate, so that *Rate is a flag.Value.
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Type names the flag's value type for github.com/spf13/pflag.
func (r *Rate) Type() string { return "rate" }

// defaultBurst is one second's worth of tokens, at least 1. perSecond must
// not be unlimited.
func defaultBurst(perSecond float64) int {
	return max(1, int(math.Ceil(perSecond)))
}
