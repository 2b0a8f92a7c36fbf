// Command testtimes reads `go test -json` on its standard input and writes
// what `go test` without -v would (each failed test with its output, an
// ok or FAIL line per package, build errors), then each package's slowest
// top-level tests. make test pipes every pass through it:
//
//	go test -json ./... | go run ./internal/testtimes
//
// It exits 1 when a package or a build failed, or when its input ended
// before a package finished (go test was killed), so a pass fails exactly
// when go test would.
//
// Output that a test binary writes after it crashed (a panic, a timeout's
// goroutine dump, a fatal runtime error) and race detector reports are
// shown in full when their package fails, whichever test go test
// attributes them to: test2json gives such output to the test it last
// heard of, which may have passed already.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	top := flag.Int("n", 15, "how many of each package's slowest tests to list")
	least := flag.Duration("min", time.Second, "leave out tests faster than this")
	flag.Parse()
	ok, err := run(os.Stdin, os.Stdout, *top, *least)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json's TestEvent, and
// the build-output events of go test itself).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

// test is one test of a package, with the output go test attributed to it.
type test struct {
	name     string
	status   string   // "" while it runs, else pass, fail or skip
	result   string   // its "--- FAIL: name (…)" line
	lines    []string // its own output, framing lines left out
	children []*test
	elapsed  time.Duration // as go test reports it: without parallel subtests
	parallel bool          // it called t.Parallel
	printed  bool
}

// pkg is one package of the pass while its tests run.
type pkg struct {
	name    string
	tests   map[string]*test
	order   []*test   // top-level tests, in the order they started
	lines   []string  // output of no test: summary lines, TestMain's
	crash   []string  // everything after a crash, and race reports
	crashed bool      // a panic or fatal error was seen: the binary is dying
	inRace  bool      // within a race detector report
	last    *[]string // where the last chunk of output went
}

// finished is what is kept of a package once it ended.
type finished struct {
	name    string
	elapsed time.Duration
	tests   []*test
}

// run copies in's test events to out as go test would print them and
// then lists each package's n slowest tests of at least least. ok is
// false when a package or build failed or in ended mid-package.
func run(in io.Reader, out io.Writer, n int, least time.Duration) (ok bool, err error) {
	ok = true
	pkgs := map[string]*pkg{}
	var done []finished
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(out, "%s\n", line) // not an event: go test's own words
			continue
		}
		switch ev.Action {
		case "build-output":
			fmt.Fprint(out, ev.Output)
			continue
		case "build-fail":
			ok = false
			continue
		}
		p := pkgs[ev.Package]
		if p == nil {
			p = &pkg{name: ev.Package, tests: map[string]*test{}}
			pkgs[ev.Package] = p
		}
		if ev.Test == "" {
			switch ev.Action {
			case "output":
				p.output(nil, ev.Output)
			case "pass", "skip", "fail":
				if ev.Action == "fail" {
					ok = false
					p.flushFailed(out)
				} else {
					p.flushPassed(out)
				}
				done = append(done, finished{p.name, seconds(ev.Elapsed), p.order})
				delete(pkgs, ev.Package)
			}
			continue
		}
		t := p.test(ev.Test)
		switch ev.Action {
		case "output":
			p.output(t, ev.Output)
		case "pause":
			t.parallel = true
		case "pass", "skip", "fail":
			t.status, t.elapsed = ev.Action, seconds(ev.Elapsed)
			if ev.Action == "fail" && !strings.Contains(t.name, "/") {
				t.print(out)
			}
			if ev.Action != "fail" {
				t.lines = nil // go test shows only failures' output
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	for _, p := range pkgs {
		ok = false
		p.flushFailed(out)
		fmt.Fprintf(out, "FAIL\t%s\t(the input ended before the package finished)\n", p.name)
		done = append(done, finished{name: p.name, tests: p.order})
	}
	slowest(out, done, n, least)
	return ok, nil
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond)
}

// test returns the test named name, making it (and its parents) on first
// mention.
func (p *pkg) test(name string) *test {
	if t := p.tests[name]; t != nil {
		return t
	}
	t := &test{name: name}
	p.tests[name] = t
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		parent := p.test(name[:i])
		parent.children = append(parent.children, t)
	} else {
		p.order = append(p.order, t)
	}
	return t
}

// output files one chunk of output that go test attributed to t (nil: to
// no test).
func (p *pkg) output(t *test, s string) {
	switch {
	case strings.HasPrefix(s, "panic: "), strings.HasPrefix(s, "fatal error: "):
		p.crashed = true
	case strings.HasPrefix(s, "WARNING: DATA RACE"):
		p.inRace = true
		// The report's opening rule went where the line before it did.
		if l := p.last; l != nil && len(*l) > 0 && (*l)[len(*l)-1] == raceRule {
			*l = (*l)[:len(*l)-1]
		}
		p.crash = append(p.crash, raceRule)
	}
	if p.crashed || p.inRace {
		p.crash = append(p.crash, s)
		p.last = &p.crash
		if p.inRace && s == raceRule {
			p.inRace = false
		}
		return
	}
	switch {
	case t == nil || t.status != "":
		// Output of no test, or of one that ended already.
		p.lines = append(p.lines, s)
		p.last = &p.lines
	case framing(s):
	case strings.HasPrefix(strings.TrimSpace(s), "--- "):
		t.result = s
	default:
		t.lines = append(t.lines, s)
		p.last = &t.lines
	}
}

// raceRule opens and closes a race detector's report.
const raceRule = "==================\n"

// framing reports whether s is one of the lines go test -json adds to say
// which test runs (go test without -v has none).
func framing(s string) bool {
	for _, f := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, f) {
			return true
		}
	}
	return false
}

// print writes t's result line and output, then those of its subtests
// that failed or never ended, as go test does for a failed test.
func (t *test) print(out io.Writer) {
	if t.printed {
		return
	}
	t.printed = true
	if t.result != "" {
		fmt.Fprint(out, t.result)
	} else if t.status == "" {
		fmt.Fprintf(out, "--- FAIL: %s (did not finish)\n", t.name)
	} else {
		fmt.Fprintf(out, "--- %s: %s (%.2fs)\n", strings.ToUpper(t.status), t.name, t.elapsed.Seconds())
	}
	for _, l := range t.lines {
		fmt.Fprint(out, l)
	}
	for _, c := range t.children {
		if c.status == "fail" || c.status == "" {
			c.print(out)
		}
	}
}

// flushFailed writes what go test shows of a failed package: tests that
// never ended (the one that crashed or timed out), everything after a
// crash, and its own lines, which end with its FAIL line.
func (p *pkg) flushFailed(out io.Writer) {
	for _, t := range p.order {
		if t.status == "" || t.status == "fail" {
			t.print(out)
		}
	}
	for _, l := range p.crash {
		fmt.Fprint(out, l)
	}
	for _, l := range p.lines {
		fmt.Fprint(out, l)
	}
}

// flushPassed writes what go test shows of a package that passed: its
// summary line.
func (p *pkg) flushPassed(out io.Writer) {
	for _, l := range p.lines {
		if strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "?   ") {
			fmt.Fprint(out, l)
		}
	}
}

// took is how long t ran: go test's time for it, which leaves out its
// parallel subtests (they run once its function returned), plus theirs.
// Time waiting for a parallel slot is in neither.
func (t *test) took() time.Duration {
	d := t.elapsed
	for _, c := range t.children {
		if c.parallel {
			d += c.took()
		} else {
			d += c.took() - c.elapsed // its time is in t's already
		}
	}
	return d
}

// slowest lists each package's n slowest top-level tests that took at
// least least, slowest packages first.
func slowest(out io.Writer, pkgs []finished, n int, least time.Duration) {
	type timed struct {
		t    *test
		took time.Duration
	}
	slices.SortStableFunc(pkgs, func(a, b finished) int { return cmp.Compare(b.elapsed, a.elapsed) })
	header := false
	for _, p := range pkgs {
		var tests []timed
		var sum time.Duration
		for _, t := range p.tests {
			tests = append(tests, timed{t, t.took()})
			sum += tests[len(tests)-1].took
		}
		slices.SortStableFunc(tests, func(a, b timed) int { return cmp.Compare(b.took, a.took) })
		if len(tests) > n {
			tests = tests[:n]
		}
		tests = slices.DeleteFunc(tests, func(t timed) bool { return t.took < least })
		if len(tests) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(out, "\nslowest tests (up to %d a package, at least %s; a test's time includes its subtests'):\n", n, least)
			header = true
		}
		fmt.Fprintf(out, "%s\t%.2fs, its tests' times add up to %.2fs\n", p.name, p.elapsed.Seconds(), sum.Seconds())
		for _, t := range tests {
			note := ""
			if t.t.status != "pass" {
				note = " (" + cmp.Or(t.t.status, "did not finish") + ")"
			}
			fmt.Fprintf(out, "%10.2fs  %s%s\n", t.took.Seconds(), t.t.name, note)
		}
	}
}
