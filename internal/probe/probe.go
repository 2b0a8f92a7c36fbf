// Package probe holds Berth's security probes: small, harmless attempts to
// get out of a sandbox (SECURITY.md section 2: ESC, RES, NET). Each probe
// makes one or more attempts and reports, for each, what the kernel
// answered, as one Result.
//
// The probes run inside a sandbox ("berth probe", a hidden subcommand) and,
// as the positive control, unsandboxed on the host (a process-runtime
// sandbox of the same daemon). They are written so that running them as
// root on a host changes nothing: calls that would have an effect get
// arguments the kernel rejects only after the permission checks (reboot
// with a bad magic number, kexec_load with an unknown flag, clock_settime
// on a clock that does not exist), so an errno such as EINVAL proves the
// call got through, while EPERM from the same call in a sandbox proves the
// sandbox stopped it. What a probe creates (a mount, a device node, a
// file) it removes again.
//
// A Result's Result field is mechanical: "allowed" when the call
// succeeded, "denied" when it failed (Errno says how), "error" when the
// probe itself could not run the attempt. Audit attempts (capabilities,
// listings) say "allowed" when they found what an attacker would want.
// Which outcome is right is for the caller to judge: the same "allowed" is
// expected of the control and a failure in a sandbox.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Result is the outcome of one attempt.
type Result struct {
	ID      string `json:"id"`      // the catalogue case, like ESC-04
	Attempt string `json:"attempt"` // what was tried, like mount(tmpfs)
	Result  string `json:"result"`  // Allowed, Denied or Error
	Errno   string `json:"errno,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Values of Result.Result.
const (
	Allowed = "allowed"
	Denied  = "denied"
	Error   = "error"
)

// Outcome sums r up in one word: "allowed", the errno name when the
// attempt was denied with one, else "denied" or "error".
func (r Result) Outcome() string {
	if r.Result == Denied && r.Errno != "" {
		return r.Errno
	}
	return r.Result
}

func (r Result) String() string {
	s := fmt.Sprintf("%s %s: %s", r.ID, r.Attempt, r.Outcome())
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

// Config is what the probes need to know about their surroundings. Zero
// values skip the attempts that need them or take defaults.
type Config struct {
	DaemonPort int    // the daemon's TCP port on 127.0.0.1
	HostIP     string // a non-loopback address of the host
	DaemonPID  int    // the daemon's PID as the host sees it
	OtherPIDs  []int  // host PIDs of other tenants' processes
	DataDir    string // the daemon's data directory on the host
	PeerPort   int    // a port another sandbox listens on, on its 127.0.0.1

	ForkMax     int // RES-01: most children to start (default 5000)
	MemoryMaxMB int // RES-03: most memory to allocate (default 4096)
	DiskMaxMB   int // RES-04: most bytes to write, in MiB (default 4096)
	FDMax       int // RES-07: most descriptors to open (default 1<<20)

	// Timeout bounds each network attempt (default 3s).
	Timeout time.Duration
}

func (c *Config) defaults() {
	if c.ForkMax <= 0 {
		c.ForkMax = 5000
	}
	if c.MemoryMaxMB <= 0 {
		c.MemoryMaxMB = 4096
	}
	if c.DiskMaxMB <= 0 {
		c.DiskMaxMB = 4096
	}
	if c.FDMax <= 0 {
		c.FDMax = 1 << 20
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Second
	}
}

// Probe is one catalogue case and its attempts.
type Probe struct {
	ID    string
	Title string
	// Heavy probes exhaust a resource of their sandbox (processes,
	// memory, disk, descriptors); "all" leaves them out.
	Heavy bool
	run   func(ctx context.Context, c *Config, r *recorder)
}

// Probes lists every probe, in catalogue order. Off Linux it is empty.
func Probes() []Probe { return probes() }

// Select returns the probes named by ids ("all" for every probe that is
// not Heavy), or an error naming an unknown ID.
func Select(ids []string) ([]Probe, error) {
	all := Probes()
	if len(all) == 0 {
		return nil, errors.New("the probes run on Linux only")
	}
	var out []Probe
	seen := map[string]bool{}
	for _, id := range ids {
		found := false
		for _, p := range all {
			if (strings.EqualFold(id, "all") && !p.Heavy) || strings.EqualFold(id, p.ID) {
				found = true
				if !seen[p.ID] {
					seen[p.ID] = true
					out = append(out, p)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown probe %q (known: all, %s)", id, strings.Join(IDs(), ", "))
		}
	}
	return out, nil
}

// IDs lists the probes' IDs.
func IDs() []string {
	var ids []string
	for _, p := range Probes() {
		ids = append(ids, p.ID)
	}
	return ids
}

// Run runs ps one after the other and calls emit with each result as it
// comes. It returns when they are done or ctx ends.
func Run(ctx context.Context, c Config, ps []Probe, emit func(Result)) error {
	c.defaults()
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.run(ctx, &c, &recorder{id: p.ID, emit: emit})
	}
	return nil
}

// WriteJSON returns an emit function that writes each result to w as one
// JSON line.
func WriteJSON(w io.Writer) func(Result) {
	enc := json.NewEncoder(w)
	return func(r Result) { _ = enc.Encode(r) }
}

// WriteText returns an emit function that writes each result to w as one
// line for people.
func WriteText(w io.Writer) func(Result) {
	return func(r Result) { fmt.Fprintln(w, r.String()) }
}

// Parse reads the JSON lines of a probe run and skips anything else.
func Parse(out string) []Result {
	var rs []Result
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r Result
		if json.Unmarshal([]byte(line), &r) == nil && r.ID != "" {
			rs = append(rs, r)
		}
	}
	return rs
}

// Serve listens on addr (TCP) for d, accepting and closing connections, so
// that a probe in another sandbox has something to try to reach (NET-17).
// Once listening it emits a NET-17 "listen" result whose Detail is the
// address it listens on.
func Serve(ctx context.Context, addr string, d time.Duration, emit func(Result)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	emit(Result{ID: "NET-17", Attempt: "listen", Result: Allowed, Detail: ln.Addr().String()})
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		conn.Close()
	}
}

// recorder collects the results of one probe.
type recorder struct {
	id   string
	emit func(Result)
}

// add records the outcome of a call: allowed when err is nil, denied
// with the errno when err carries one, else denied with the error text.
func (r *recorder) add(attempt string, err error, detail string) {
	res := Result{ID: r.id, Attempt: attempt, Result: Allowed, Detail: detail}
	if err != nil {
		res.Result = Denied
		res.Errno = errnoName(err)
		if res.Errno == "" || detail == "" {
			res.Detail = joinDetail(detail, err.Error())
		}
	}
	r.emit(res)
}

func (r *recorder) allowed(attempt, detail string) {
	r.emit(Result{ID: r.id, Attempt: attempt, Result: Allowed, Detail: detail})
}

func (r *recorder) denied(attempt, errno, detail string) {
	r.emit(Result{ID: r.id, Attempt: attempt, Result: Denied, Errno: errno, Detail: detail})
}

func (r *recorder) errorf(attempt, format string, args ...any) {
	r.emit(Result{ID: r.id, Attempt: attempt, Result: Error, Detail: fmt.Sprintf(format, args...)})
}

func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// errnoName names the errno in err ("EPERM"), "ETIMEDOUT" for a timeout,
// or "" when there is none.
func errnoName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if name := errnoNames[en]; name != "" {
			return name
		}
		return "errno " + strconv.Itoa(int(en))
	}
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "ETIMEDOUT"
	}
	return ""
}

// errnoNames are the errnos the probes may meet, by their Linux values.
var errnoNames = map[syscall.Errno]string{
	1: "EPERM", 2: "ENOENT", 3: "ESRCH", 4: "EINTR", 5: "EIO", 6: "ENXIO", 7: "E2BIG", 8: "ENOEXEC",
	9: "EBADF", 10: "ECHILD", 11: "EAGAIN", 12: "ENOMEM", 13: "EACCES", 14: "EFAULT", 16: "EBUSY",
	17: "EEXIST", 18: "EXDEV", 19: "ENODEV", 20: "ENOTDIR", 21: "EISDIR", 22: "EINVAL", 23: "ENFILE",
	24: "EMFILE", 25: "ENOTTY", 26: "ETXTBSY", 27: "EFBIG", 28: "ENOSPC", 30: "EROFS", 36: "ENAMETOOLONG",
	38: "ENOSYS", 40: "ELOOP", 61: "ENODATA", 95: "EOPNOTSUPP", 97: "EAFNOSUPPORT", 93: "EPROTONOSUPPORT",
	94: "ESOCKTNOSUPPORT", 98: "EADDRINUSE", 99: "EADDRNOTAVAIL", 100: "ENETDOWN", 101: "ENETUNREACH",
	104: "ECONNRESET", 110: "ETIMEDOUT", 111: "ECONNREFUSED", 113: "EHOSTUNREACH", 122: "EDQUOT",
	126: "ENOKEY",
}

// truncate bounds a detail string.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// list joins names for a detail, sorted, at most n of them.
func list(names []string, n int) string {
	names = slices.Clone(names)
	slices.Sort(names)
	if len(names) > n {
		return strings.Join(names[:n], ",") + fmt.Sprintf(",...(%d in all)", len(names))
	}
	return strings.Join(names, ",")
}
