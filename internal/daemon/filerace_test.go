package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// fileSwapper swaps the workspace entries "dir" (a directory) and "link"
// (a symbolic link to an outside directory) with renameat2(RENAME_EXCHANGE),
// so "dir" is one and then the other, until the file "stop" appears or its
// bounds (argv[1] swaps, argv[2] seconds) run out. Every 63 swaps (odd, so
// both states come round) it reads dir/file by path, as an unprotected
// reader would: the positive control that the race reaches outside. At the
// end it prints its counts and what the outside directory holds as JSON.
const fileSwapper = `
import ctypes, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = libc.renameat2
renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT_FDCWD, RENAME_EXCHANGE = -100, 2
max_swaps, max_secs, outside, real, canary = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
out = {"swaps": 0, "real": 0, "canary": 0, "stopped": False}
open("started", "w").close()
end = time.monotonic() + max_secs
while out["swaps"] < max_swaps and time.monotonic() < end:
    if renameat2(AT_FDCWD, b"dir", AT_FDCWD, b"link", RENAME_EXCHANGE) != 0:
        out["error"] = os.strerror(ctypes.get_errno())
        break
    out["swaps"] += 1
    if out["swaps"] % 63 == 0:
        if os.path.exists("stop"):
            out["stopped"] = True
            break
        with open("dir/file") as f:
            s = f.read()
        out["real"] += s == real
        out["canary"] += s == canary
out["outside"] = sorted(os.listdir(outside))
print(json.dumps(out))
`

// swapperResult is what fileSwapper prints.
type swapperResult struct {
	Swaps   int      `json:"swaps"`
	Real    int      `json:"real"`
	Canary  int      `json:"canary"`
	Stopped bool     `json:"stopped"`
	Error   string   `json:"error"`
	Outside []string `json:"outside"`
}

// TestFileSwapRace covers the check-then-use race of issue 11: while a
// program in the sandbox swaps the directory "dir" with a symbolic link to
// a directory outside the workspace, the API reads dir/file (and lists
// dir, writes, makes directories and removes in it) many times. No answer
// may come from outside, nothing outside may change, and no answer may be
// a 500: each is the workspace's content or a specific refusal.
//
// Positive controls: the program swaps throughout the reads and its own
// path-following reads of dir/file see the canary, so the race is real;
// and the API answers both with the real content and with refusals, so it
// did meet both states.
func TestFileSwapRace(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "python3")
	d := testenv.StartDaemon(t, nil)
	sb, _ := newFileSandbox(t, d)
	c, id := d.Client, sb.ID
	real, canary := "REAL "+rand.Text(), "CANARY "+rand.Text()
	outside := "/tmp/berth-race-" + rand.Text()
	runScript(t, d, id, strings.Join([]string{
		"mkdir -p dir " + outside,
		"printf %s '" + real + "' > dir/file",
		"printf %s '" + canary + "' > " + outside + "/file",
		"echo victim > dir/victim",
		"echo victim > " + outside + "/victim",
		"ln -s " + outside + " link",
	}, " && "))
	t.Cleanup(func() {
		// Under the process runtime the outside directory is the host's.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = c.Run(ctx, id, apitype.CreateCommandRequest{Argv: []string{"rm", "-rf", outside}})
	})

	// Bounds: the swapper stops at "stop", after 10^9 swaps or after
	// 280 s; the whole test has six minutes. Time is the bound that holds:
	// on the process runtime a host swaps 10^7 times in under a minute,
	// sooner than a loaded machine answers the 500 rounds below.
	ctx := fileCtx(t, 6*time.Minute)
	swapper, err := c.Exec(ctx, id, apitype.CreateCommandRequest{
		Argv:      []string{"python3", "-c", fileSwapper, "1000000000", "280", outside, real, canary},
		TimeoutMS: 300_000,
	})
	if err != nil || swapper.Status != apitype.CommandRunning {
		t.Fatalf("starting the swapper = %+v, %v, want running", swapper, err)
	}
	testenv.Eventually(t, time.Minute, "the swapper starts", func() bool {
		_, err := catFile(ctx, c, id, "started")
		return err == nil
	})

	// Up to 500 rounds, while the swapper surely swaps (it stops at 280
	// s): a loaded machine (gVisor, the whole suite running) answers
	// fewer in that time, and at least minRounds is the control.
	const maxRounds, minRounds, raceFor = 500, 50, 200 * time.Second
	raceStart := time.Now()
	rounds := 0
	got := map[string]int{} // outcome -> count
	var bad []string
	note := func(op string, outcome string, allowed ...string) {
		got[op+" "+outcome]++
		if !slices.Contains(allowed, outcome) && len(bad) < 20 {
			bad = append(bad, op+": "+outcome)
		}
	}
	for i := 0; i < maxRounds && time.Since(raceStart) < raceFor; i++ {
		rounds++
		b, err := catFile(ctx, c, id, "dir/file")
		switch {
		case err == nil && string(b) == real:
			note("read", "real", "real")
		case err == nil && string(b) == canary:
			note("read", "CANARY (read from outside the workspace)")
		case err == nil:
			note("read", fmt.Sprintf("content %.40q", b))
		default:
			note("read", apiErr(err), fileEscapes)
		}
		if i%5 != 0 {
			continue
		}
		l, err := c.ListFiles(ctx, id, "dir", "", 0)
		outcome := apiErr(err)
		if err == nil {
			outcome = listNames(l)
		}
		note("list", outcome, "file victim", "file", fileEscapes) // victim is removed below
		_, err = c.WriteFile(ctx, id, fmt.Sprintf("dir/w-%d", i), strings.NewReader("w"), 0)
		note("write", apiErr(err), fileOK, fileEscapes)
		err = c.Mkdir(ctx, id, fmt.Sprintf("dir/m-%d", i))
		note("mkdir", apiErr(err), fileOK, fileEscapes)
		err = c.Remove(ctx, id, "dir/victim", false)
		note("remove", apiErr(err), fileOK, fileNotFound, fileEscapes)
		_ = c.Remove(ctx, id, fmt.Sprintf("dir/w-%d", i), false)
		_ = c.Remove(ctx, id, fmt.Sprintf("dir/m-%d", i), false)
	}
	if _, err := c.WriteFile(ctx, id, "stop", strings.NewReader(""), 0); err != nil {
		t.Fatalf("WriteFile(stop) = %s, want ok", apiErr(err))
	}
	done, err := c.Command(ctx, id, swapper.ID, client.CommandQuery{WaitMS: 60_000})
	for err == nil && !done.Done() {
		done, err = c.Command(ctx, id, swapper.ID, client.CommandQuery{WaitMS: 60_000})
	}
	if err != nil || done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("swapper = %+v, %v, want exit 0", done, err)
	}
	var res swapperResult
	if err := json.Unmarshal([]byte(done.Stdout), &res); err != nil {
		t.Fatalf("swapper output %q: %v", done.Stdout, err)
	}
	t.Logf("swapper: %+v; %d rounds; API outcomes: %v", res, rounds, got)
	if rounds < minRounds {
		t.Errorf("control: the API answered %d rounds in %v, want at least %d", rounds, raceFor, minRounds)
	}

	if len(bad) > 0 {
		t.Errorf("API answers during the race, want only workspace content or a refusal:\n%s", strings.Join(bad, "\n"))
	}
	if want := []string{"file", "victim"}; !slices.Equal(res.Outside, want) {
		t.Errorf("outside directory after the race = %q, want %q: an operation reached it", res.Outside, want)
	}
	// Positive controls.
	if res.Error != "" || !res.Stopped {
		t.Errorf("swapper ended with error %q, stopped %v: want it swapping until told to stop", res.Error, res.Stopped)
	}
	if res.Swaps < rounds || res.Canary == 0 || res.Real == 0 {
		t.Errorf("control: swapper made %d swaps and read the canary %d and the real file %d times by path, want at least %d swaps and both reads",
			res.Swaps, res.Canary, res.Real, rounds)
	}
	if got["read real"] == 0 || got["read "+fileEscapes] == 0 {
		t.Errorf("control: API reads = %v, want both the real content and refusals (the race met both states)", got)
	}
}

// listNames is the names of a listing, space-separated, without the
// test's own transient entries.
func listNames(l apitype.FileList) string {
	var names []string
	for _, e := range l.Entries {
		if !strings.HasPrefix(e.Name, "w-") && !strings.HasPrefix(e.Name, "m-") && !strings.HasPrefix(e.Name, ".berth-upload-") {
			names = append(names, e.Name)
		}
	}
	return strings.Join(names, " ")
}
