package netpolicy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Reasons a connection is refused, for Decision.Reason.
const (
	ReasonSpecialPurpose = "special_purpose" // a special-purpose address; see SpecialPurpose
	ReasonHostAddress    = "host_address"    // an address in Limits.Blocked
	ReasonPortBlocked    = "port_blocked"    // a port no rule opens
	ReasonDeniedByRule   = "denied_by_rule"  // a deny entry matched
	ReasonNotAllowed     = "not_allowed"     // not in an allowlist, or mode none
)

// Decision is Decide's verdict on one connection.
type Decision struct {
	Allowed bool
	// Reason is "" when allowed, else one of the Reason constants.
	Reason string
	// Detail says which range or rule decided, for people: as in
	// `169.254.0.0/16 (link-local)` or `deny "*.evil.com"`.
	Detail string
}

// Decide decides a connection to ip:port under policy p and limits lim, in
// the order the package documentation gives. names are the domain names
// known for the connection (from SNI, Host and DNS answers for ip; may be
// empty); matching lowercases them and drops a trailing dot. Entries of p
// that do not parse fail closed: a bad deny entry refuses every connection,
// a bad allow entry opens nothing. Decide is pure and safe for concurrent
// use.
func Decide(p Policy, lim Limits, names []string, ip netip.Addr, port int) Decision {
	if !p.Egress() {
		return refuse(ReasonNotAllowed, fmt.Sprintf("network mode is %s, not egress", cmp.Or(p.Mode, ModeNone)))
	}

	// 1. Hard limits.
	ip = ip.WithZone("").Unmap()
	addrs := []netip.Addr{ip}
	if v4, ok := embeddedIPv4(ip); ok {
		addrs = append(addrs, v4)
	}
	for _, b := range lim.Blocked {
		for _, a := range addrs {
			if unmapPrefix(b).Contains(a) {
				return refuse(ReasonHostAddress, fmt.Sprintf("%s (a host address)", b))
			}
		}
	}
	if name, ok := special(ip, lim.Public); ok {
		return refuse(ReasonSpecialPurpose, name)
	}

	// 2. Deny rules.
	names = normalNames(names)
	for _, s := range p.Deny {
		e, err := ParseEntry(s)
		if err != nil {
			return refuse(ReasonDeniedByRule, fmt.Sprintf("deny %q does not parse, so it refuses everything", s))
		}
		if denies(e, names, addrs, port) {
			return refuse(ReasonDeniedByRule, fmt.Sprintf("deny %q", s))
		}
	}
	for _, e := range lim.Deny {
		if denies(e, names, addrs, port) {
			return refuse(ReasonDeniedByRule, fmt.Sprintf("daemon deny %q", e.raw))
		}
	}

	// 3. The port baseline.
	ports := p.Ports
	if len(ports) == 0 {
		ports = lim.DefaultPorts
	}
	if len(ports) == 0 {
		ports = defaultPorts
	}
	if port < 1 || port > 65535 {
		return refuse(ReasonPortBlocked, fmt.Sprintf("port %d is not between 1 and 65535", port))
	}
	if !lim.portAllowed(port) {
		return refuse(ReasonPortBlocked, lim.beyondLimit(port))
	}

	// 4. The daemon's allowlist.
	if len(lim.AllowOnly) > 0 && !permits(lim.AllowOnly, ports, names, ip, port) {
		return refuse(ReasonNotAllowed, fmt.Sprintf("no daemon allow_only entry matches port %d", port))
	}

	// 5. The sandbox's allowlist, which its Allow entries extend.
	allow := parseValid(p.Allow)
	if len(p.AllowOnly) > 0 {
		if !permits(parseValid(p.AllowOnly), ports, names, ip, port) && !permits(allow, ports, names, ip, port) {
			return refuse(ReasonNotAllowed, fmt.Sprintf("no allow_only or allow entry matches port %d", port))
		}
		return Decision{Allowed: true}
	}
	if len(lim.AllowOnly) > 0 {
		return Decision{Allowed: true}
	}

	// 6. No allowlist: the baseline ports, and Allow entries' own ports.
	if slices.Contains(ports, port) {
		return Decision{Allowed: true}
	}
	for _, e := range allow {
		if e.port == port && e.matches(names, ip) {
			return Decision{Allowed: true}
		}
	}
	return refuse(ReasonPortBlocked, fmt.Sprintf("port %d is not in ports (%s) and no allow entry opens it", port, portList(ports)))
}

func refuse(reason, detail string) Decision {
	return Decision{Reason: reason, Detail: detail}
}

// denies reports whether deny entry e matches the connection: its port if
// it has one, and one of names or addrs (the address and the IPv4 address
// it embeds).
func denies(e Entry, names []string, addrs []netip.Addr, port int) bool {
	if e.port != 0 && e.port != port {
		return false
	}
	for _, a := range addrs {
		if e.matches(names, a) {
			return true
		}
	}
	return false
}

// permits reports whether one of entries matches the destination and the
// port: an entry's own port, or a baseline port for an entry without one.
func permits(entries []Entry, ports []int, names []string, ip netip.Addr, port int) bool {
	for _, e := range entries {
		if e.port == 0 && !slices.Contains(ports, port) || e.port != 0 && e.port != port {
			continue
		}
		if e.matches(names, ip) {
			return true
		}
	}
	return false
}

// parseValid parses list, skipping entries that do not parse.
func parseValid(list []string) []Entry {
	entries := make([]Entry, 0, len(list))
	for _, s := range list {
		if e, err := ParseEntry(s); err == nil {
			entries = append(entries, e)
		}
	}
	return entries
}

// normalNames returns names lowercased, without a trailing dot, and without
// empty names.
func normalNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSuffix(n, ".")); n != "" {
			out = append(out, n)
		}
	}
	return out
}
