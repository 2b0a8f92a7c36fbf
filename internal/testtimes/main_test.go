package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The inputs in testdata are go test -json's output for small packages
// that fail, panic, time out, race, fail to build and pass.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file string
		ok   bool
		want []string // in this order
		not  []string
	}{
		{
			file: "fail.json",
			want: []string{"--- FAIL: TestFail (", "x_test.go:4: shown", "--- FAIL: TestFail/bad (", "sub fails", "FAIL\tx\t"},
			not:  []string{"hidden", "=== RUN", "--- PASS", "skipme", "ok  "},
		},
		{
			file: "panic.json",
			want: []string{"--- FAIL: TestPanic (", "panic: assignment to entry in nil map", "x.TestPanic(", "x_test.go:5", "FAIL\tx\t"},
			not:  []string{"hidden"},
		},
		{
			// The timeout's goroutine dump is attributed to TestPass,
			// which never ends.
			file: "timeout.json",
			want: []string{"--- FAIL: TestPass (did not finish)", "panic: test timed out after 10ms", "running tests:",
				"goroutine 1 [chan receive]", "x.TestPass(", "FAIL\tx\t"},
		},
		{
			file: "race.json",
			want: []string{"--- FAIL: TestRace (", "race detected during execution of test\n==================\nWARNING: DATA RACE",
				"Previous write at", "FAIL\tx/r\t"},
			not: []string{"--- PASS"},
		},
		{
			file: "okbuild.json",
			want: []string{"# x/b [x/b.test]\nb/b.go:2:12: undefined: x\n", "FAIL\tx/b [build failed]", "ok  \tx/ok\t",
				"slowest tests", "x/ok\t", "s  TestSlow\n"},
			not: []string{"hidden", "TestQuick"},
		},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			in, err := os.Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			var out strings.Builder
			ok, err := run(in, &out, 15, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if ok != tt.ok {
				t.Errorf("run(%s) ok = %v, want %v; output:\n%s", tt.file, ok, tt.ok, got)
			}
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("run(%s) output lacks %q (after the previous ones); output:\n%s", tt.file, w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("run(%s) output has %q; output:\n%s", tt.file, n, got)
				}
			}
		})
	}
}

// A pass that passes exits 0; one whose input ends mid-package (go test
// killed) does not.
func TestRunPassAndCutShort(t *testing.T) {
	t.Parallel()
	pass := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: quiet\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (2.50s)\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":2.5}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t2.600s\n"}
{"Action":"pass","Package":"p","Elapsed":2.6}
`
	var out strings.Builder
	ok, err := run(strings.NewReader(pass), &out, 15, time.Second)
	if err != nil || !ok {
		t.Errorf("run(a passing package) = %v, %v, want true, nil; output:\n%s", ok, err, out.String())
	}
	if want := "ok  \tp\t2.600s\n\nslowest tests (up to 15 a package, at least 1s; a test's time includes its subtests'):\np\t2.60s, its tests' times add up to 2.50s\n      2.50s  TestA\n"; out.String() != want {
		t.Errorf("run(a passing package) wrote\n%q, want\n%q", out.String(), want)
	}

	cut := pass[:strings.Index(pass, `{"Action":"pass","Package":"p","Test"`)]
	out.Reset()
	ok, err = run(strings.NewReader(cut), &out, 15, time.Second)
	if err != nil || ok {
		t.Errorf("run(a package cut short) = %v, %v, want false, nil; output:\n%s", ok, err, out.String())
	}
	if !strings.Contains(out.String(), "a_test.go:1: quiet") || !strings.Contains(out.String(), "FAIL\tp\t(the input ended") {
		t.Errorf("run(a package cut short) wrote\n%s\nwant TestA's output and a FAIL line", out.String())
	}
}

// A test's time counts its parallel subtests, which go test leaves out of
// the parent's, and its sequential ones once.
func TestTook(t *testing.T) {
	t.Parallel()
	in := `{"Action":"run","Package":"p","Test":"TestP"}
{"Action":"run","Package":"p","Test":"TestP/seq"}
{"Action":"pass","Package":"p","Test":"TestP/seq","Elapsed":1}
{"Action":"run","Package":"p","Test":"TestP/par"}
{"Action":"pause","Package":"p","Test":"TestP/par"}
{"Action":"cont","Package":"p","Test":"TestP/par"}
{"Action":"pass","Package":"p","Test":"TestP/par","Elapsed":2}
{"Action":"pass","Package":"p","Test":"TestP","Elapsed":1.1}
{"Action":"output","Package":"p","Output":"ok  \tp\t3.200s\n"}
{"Action":"pass","Package":"p","Elapsed":3.2}
`
	var out strings.Builder
	if ok, err := run(strings.NewReader(in), &out, 15, time.Second); !ok || err != nil {
		t.Fatalf("run = %v, %v; output:\n%s", ok, err, out.String())
	}
	if want := "      3.10s  TestP\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("run wrote\n%s\nwant it to end with %q", out.String(), want)
	}
}
