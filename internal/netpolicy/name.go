package netpolicy

import (
	"cmp"
	"fmt"
	"net/netip"
)

// DecideName decides whether any connection to name could be allowed,
// before an address is known: the question Berth's resolver asks before it
// looks a name up, so that a refused name is never sent to a resolver
// (NET-15). A name is refused when a deny domain entry without a port
// matches it, or when an allowlist is set and none of its entries could
// match it: a domain entry that matches the name, or any address entry
// (the name might resolve into it).
func DecideName(p Policy, lim Limits, name string) Decision {
	if !p.Egress() {
		return refuse(ReasonNotAllowed, fmt.Sprintf("network mode is %s, not egress", cmp.Or(p.Mode, ModeNone)))
	}
	names := normalNames([]string{name})
	if len(names) == 0 {
		return refuse(ReasonNotAllowed, "no name")
	}
	for _, s := range p.Deny {
		e, err := ParseEntry(s)
		if err != nil {
			return refuse(ReasonDeniedByRule, fmt.Sprintf("deny %q does not parse, so it refuses everything", s))
		}
		if e.port == 0 && e.matches(names, netip.Addr{}) {
			return refuse(ReasonDeniedByRule, fmt.Sprintf("deny %q", s))
		}
	}
	for _, e := range lim.Deny {
		if e.port == 0 && e.matches(names, netip.Addr{}) {
			return refuse(ReasonDeniedByRule, fmt.Sprintf("daemon deny %q", e.raw))
		}
	}
	if len(lim.AllowOnly) > 0 && !couldMatch(lim.AllowOnly, names) {
		return refuse(ReasonNotAllowed, fmt.Sprintf("no daemon allow_only entry matches %s", names[0]))
	}
	if len(p.AllowOnly) > 0 && !couldMatch(parseValid(p.AllowOnly), names) && !couldMatch(parseValid(p.Allow), names) {
		return refuse(ReasonNotAllowed, fmt.Sprintf("no allow_only or allow entry matches %s", names[0]))
	}
	return Decision{Allowed: true}
}

// couldMatch reports whether a destination named names could match one of
// entries, whatever its address.
func couldMatch(entries []Entry, names []string) bool {
	for _, e := range entries {
		if e.prefix.IsValid() || e.matches(names, netip.Addr{}) {
			return true
		}
	}
	return false
}
