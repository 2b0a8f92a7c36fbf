package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Network modes.
const (
	// ModeNone gives a sandbox loopback only. It is the default.
	ModeNone = "none"
	// ModeEgress lets a sandbox reach the internet through Berth, as its
	// Policy and the daemon's Limits allow.
	ModeEgress = "egress"
)

// maxListLen caps each list of a Policy.
const maxListLen = 256

// defaultPorts are the baseline ports when neither a policy nor the daemon
// lists any.
var defaultPorts = []int{80, 443}

// Policy is a sandbox's network policy (also the daemon-wide defaults). Its
// JSON form is the wire format. See the package documentation for the
// entry grammar and how a connection is decided.
type Policy struct {
	// Mode is "none" (loopback only; "" means none) or "egress".
	Mode string `json:"mode"`
	// Allow lists extra destinations, usually with a port
	// ("github.com:22").
	Allow []string `json:"allow,omitempty"`
	// Deny lists destinations refused; deny always wins.
	Deny []string `json:"deny,omitempty"`
	// AllowOnly, when non-empty, lists the only destinations reachable
	// (with Allow's).
	AllowOnly []string `json:"allow_only,omitempty"`
	// Ports are the ports any allowed destination may be reached on; empty
	// means the daemon's default.
	Ports []int `json:"ports,omitempty"`
}

// Limits are the daemon-wide settings every sandbox's policy is held to.
type Limits struct {
	// DefaultPorts are the baseline ports when a policy lists none; empty
	// means 80 and 443.
	DefaultPorts []int
	// PortLimit, when non-empty, are the only ports any sandbox may ever
	// use: Validate refuses a policy naming another, and Decide refuses a
	// connection to another. Empty means no limit beyond 1-65535; a daemon
	// that wants sandboxes held to the default ports sets it to them.
	PortLimit []int
	// Deny are daemon-wide deny entries, checked with every policy's.
	Deny []Entry
	// AllowOnly, when non-empty, is a daemon-wide allowlist no policy can
	// widen.
	AllowOnly []Entry
	// Public are prefixes treated as public although special-purpose, for
	// tests and operators (a test server on 198.51.100.7).
	Public []netip.Prefix
	// Blocked are extra prefixes no sandbox may reach, such as the host's
	// own addresses; they win over Public.
	Blocked []netip.Prefix
}

// Egress reports whether the policy's mode is egress.
func (p Policy) Egress() bool { return p.Mode == ModeEgress }

// Validate returns the policy's problems keyed by field path, as in
// "network.allow[2]", or nil when it is valid under limits.
func (p Policy) Validate(limits Limits) map[string]string {
	problems := map[string]string{}
	switch p.Mode {
	case "", ModeNone, ModeEgress:
	default:
		problems["network.mode"] = "must be none or egress"
	}
	for _, l := range []struct {
		field   string
		entries []string
		limited bool // whether the entries' ports are held to limits.PortLimit
	}{
		{"network.allow", p.Allow, true},
		{"network.deny", p.Deny, false}, // denying a port never widens access
		{"network.allow_only", p.AllowOnly, true},
	} {
		if !checkList(problems, l.field, len(l.entries), p.Mode) {
			continue
		}
		for i, s := range l.entries {
			field := fmt.Sprintf("%s[%d]", l.field, i)
			e, err := ParseEntry(s)
			switch {
			case err != nil:
				problems[field] = err.Error()
			case l.limited && e.port != 0 && !limits.portAllowed(e.port):
				problems[field] = fmt.Sprintf("%q: %s", s, limits.beyondLimit(e.port))
			}
		}
	}
	if checkList(problems, "network.ports", len(p.Ports), p.Mode) {
		for i, port := range p.Ports {
			field := fmt.Sprintf("network.ports[%d]", i)
			switch {
			case port < 1 || port > 65535:
				problems[field] = fmt.Sprintf("port %d is not between 1 and 65535", port)
			case !limits.portAllowed(port):
				problems[field] = limits.beyondLimit(port)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return problems
}

// checkList records the problems of a whole list, if it has any, and
// reports whether its items are worth checking one by one.
func checkList(problems map[string]string, field string, n int, mode string) bool {
	if n == 0 {
		return false
	}
	check := true
	if n > maxListLen {
		problems[field] = fmt.Sprintf("has %d entries; at most %d are allowed", n, maxListLen)
		check = false
	}
	if mode == "" || mode == ModeNone {
		problems[field] = "rules need mode egress"
	}
	return check
}

// portAllowed reports whether port is within the daemon's port limit.
func (l Limits) portAllowed(port int) bool {
	return len(l.PortLimit) == 0 || slices.Contains(l.PortLimit, port)
}

// beyondLimit says that port is beyond the daemon's port limit.
func (l Limits) beyondLimit(port int) string {
	return fmt.Sprintf("port %d is beyond the daemon's egress port limit (%s)", port, portList(l.PortLimit))
}

// portList formats ports sorted, without duplicates: "22, 80, 443".
func portList(ports []int) string {
	ports = slices.Compact(slices.Sorted(slices.Values(ports)))
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// Normalize returns a canonical copy of the policy: mode "" becomes "none";
// entries are rewritten canonically (lowercase, no trailing dot, addresses
// in canonical form) and duplicates dropped, keeping the first; ports are
// sorted and deduplicated; empty lists become nil. An entry that does not
// parse is kept as written, for Validate to report. Normalize does not
// change p.
func (p Policy) Normalize() Policy {
	n := Policy{
		Mode:      p.Mode,
		Allow:     normalEntries(p.Allow),
		Deny:      normalEntries(p.Deny),
		AllowOnly: normalEntries(p.AllowOnly),
	}
	if n.Mode == "" {
		n.Mode = ModeNone
	}
	if len(p.Ports) > 0 {
		n.Ports = slices.Compact(slices.Sorted(slices.Values(p.Ports)))
	}
	return n
}

// normalEntries returns the canonical forms of list, without duplicates.
func normalEntries(list []string) []string {
	var out []string
	seen := make(map[string]bool, len(list))
	for _, s := range list {
		if e, err := ParseEntry(s); err == nil {
			s = e.canonical()
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
