package netpolicy

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// probe is one call of Decide.
type probe struct {
	p     Policy
	lim   Limits
	names []string
	ip    string
	port  int
}

func (pr probe) decide(t *testing.T) Decision {
	t.Helper()
	return Decide(pr.p, pr.lim, pr.names, netip.MustParseAddr(pr.ip), pr.port)
}

// egress is an egress policy with the given changes.
func egress(change func(*Policy)) Policy {
	p := Policy{Mode: ModeEgress}
	if change != nil {
		change(&p)
	}
	return p
}

func prefixes(s ...string) []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range s {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

// TestDecide: each refused probe comes with a control, the same probe with
// one thing changed (usually the protection turned off), which is allowed;
// so a refusal cannot come from a broken probe.
func TestDecide(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		refused   probe
		reason    string
		detail    string // a substring of the Detail
		allowedBy string // what the control changes
		control   probe
	}{
		{
			name:    "8.8.8.8 on 25 by default",
			refused: probe{p: egress(nil), ip: "8.8.8.8", port: 25},
			reason:  ReasonPortBlocked, detail: "port 25 is not in ports (80, 443) and no allow entry opens it",
			allowedBy: "port 443",
			control:   probe{p: egress(nil), ip: "8.8.8.8", port: 443},
		},
		{
			name:    "2606:4700::1111 on 25 by default",
			refused: probe{p: egress(nil), ip: "2606:4700::1111", port: 25},
			reason:  ReasonPortBlocked, detail: "port 25",
			allowedBy: "port 443",
			control:   probe{p: egress(nil), ip: "2606:4700::1111", port: 443},
		},
		{
			name:    "mode none",
			refused: probe{p: Policy{}, ip: "8.8.8.8", port: 443},
			reason:  ReasonNotAllowed, detail: "network mode is none, not egress",
			allowedBy: "mode egress",
			control:   probe{p: egress(nil), ip: "8.8.8.8", port: 443},
		},
		{
			name:    "cloud metadata",
			refused: probe{p: egress(nil), ip: "169.254.169.254", port: 80},
			reason:  ReasonSpecialPurpose, detail: "169.254.0.0/16 (link-local)",
			allowedBy: "Limits.Public",
			control:   probe{p: egress(nil), lim: Limits{Public: prefixes("169.254.0.0/16")}, ip: "169.254.169.254", port: 80},
		},
		{
			name:    "special purpose beats the sandbox's rules",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"10.0.0.0/8"}; p.Allow = []string{"10.0.0.1:22"} }), ip: "10.0.0.1", port: 22},
			reason:  ReasonSpecialPurpose, detail: "10.0.0.0/8 (private-use)",
			allowedBy: "Limits.Public",
			control: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"10.0.0.0/8"}; p.Allow = []string{"10.0.0.1:22"} }),
				lim: Limits{Public: prefixes("10.0.0.0/8")}, ip: "10.0.0.1", port: 22},
		},
		{
			name:    "IPv4-mapped metadata",
			refused: probe{p: egress(nil), ip: "::ffff:169.254.169.254", port: 80},
			reason:  ReasonSpecialPurpose, detail: "169.254.0.0/16 (link-local)",
			allowedBy: "a public IPv4 inside",
			control:   probe{p: egress(nil), ip: "::ffff:8.8.8.8", port: 80},
		},
		{
			name:    "NAT64 metadata",
			refused: probe{p: egress(nil), ip: "64:ff9b::a9fe:a9fe", port: 80},
			reason:  ReasonSpecialPurpose, detail: "64:ff9b::/96 (NAT64) embedding 169.254.0.0/16 (link-local)",
			allowedBy: "a public IPv4 inside",
			control:   probe{p: egress(nil), ip: "64:ff9b::808:808", port: 80},
		},
		{
			name:    "6to4 metadata",
			refused: probe{p: egress(nil), ip: "2002:a9fe:a9fe::1", port: 80},
			reason:  ReasonSpecialPurpose, detail: "2002::/16 (6to4) embedding 169.254.0.0/16 (link-local)",
			allowedBy: "a public IPv4 inside",
			control:   probe{p: egress(nil), ip: "2002:0808:0808::1", port: 80},
		},
		{
			name:    "AWS IPv6 metadata",
			refused: probe{p: egress(nil), ip: "fd00:ec2::254", port: 80},
			reason:  ReasonSpecialPurpose, detail: "fc00::/7 (unique-local)",
			allowedBy: "Limits.Public",
			control:   probe{p: egress(nil), lim: Limits{Public: prefixes("fd00:ec2::/32")}, ip: "fd00:ec2::254", port: 80},
		},
		{
			name:    "zoned link-local",
			refused: probe{p: egress(nil), ip: "fe80::1%eth0", port: 443},
			reason:  ReasonSpecialPurpose, detail: "fe80::/10 (link-local)",
			allowedBy: "Limits.Public",
			control:   probe{p: egress(nil), lim: Limits{Public: prefixes("fe80::/10")}, ip: "fe80::1%eth0", port: 443},
		},
		{
			name:    "documentation range without the Public override",
			refused: probe{p: egress(nil), ip: "198.51.100.7", port: 443},
			reason:  ReasonSpecialPurpose, detail: "198.51.100.0/24 (documentation (TEST-NET-2))",
			allowedBy: "Limits.Public",
			control:   probe{p: egress(nil), lim: Limits{Public: prefixes("198.51.100.0/24")}, ip: "198.51.100.7", port: 443},
		},
		{
			name:    "Public applies to an embedded IPv4",
			refused: probe{p: egress(nil), ip: "64:ff9b::c633:6407", port: 443},
			reason:  ReasonSpecialPurpose, detail: "embedding 198.51.100.0/24",
			allowedBy: "Limits.Public",
			control:   probe{p: egress(nil), lim: Limits{Public: prefixes("198.51.100.0/24")}, ip: "64:ff9b::c633:6407", port: 443},
		},
		{
			name: "Blocked wins over Public",
			refused: probe{p: egress(nil), lim: Limits{Public: prefixes("198.51.100.0/24"), Blocked: prefixes("198.51.100.7/32")},
				ip: "198.51.100.7", port: 443},
			reason: ReasonHostAddress, detail: "198.51.100.7/32 (a host address)",
			allowedBy: "no Blocked",
			control:   probe{p: egress(nil), lim: Limits{Public: prefixes("198.51.100.0/24")}, ip: "198.51.100.7", port: 443},
		},
		{
			name:    "Blocked public host address",
			refused: probe{p: egress(nil), lim: Limits{Blocked: prefixes("8.8.4.4/32")}, ip: "8.8.4.4", port: 443},
			reason:  ReasonHostAddress, detail: "8.8.4.4/32",
			allowedBy: "another address",
			control:   probe{p: egress(nil), lim: Limits{Blocked: prefixes("8.8.4.4/32")}, ip: "8.8.8.8", port: 443},
		},
		{
			name:    "Blocked through IPv4-mapped and NAT64",
			refused: probe{p: egress(nil), lim: Limits{Blocked: prefixes("::ffff:8.8.4.4/128")}, ip: "64:ff9b::808:404", port: 443},
			reason:  ReasonHostAddress, detail: "8.8.4.4",
			allowedBy: "another address",
			control:   probe{p: egress(nil), lim: Limits{Blocked: prefixes("::ffff:8.8.4.4/128")}, ip: "64:ff9b::808:808", port: 443},
		},
		{
			name:    "Blocked beats allow rules",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"8.8.4.4"} }), lim: Limits{Blocked: prefixes("8.8.4.0/24")}, ip: "8.8.4.4", port: 443},
			reason:  ReasonHostAddress, detail: "8.8.4.0/24 (a host address)",
			allowedBy: "no Blocked",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"8.8.4.4"} }), ip: "8.8.4.4", port: 443},
		},
		{
			name:    "deny by name",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"evil.com"} }), names: []string{"evil.com"}, ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "evil.com"`,
			allowedBy: "another name",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"evil.com"} }), names: []string{"good.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name: "deny by any known name, however written",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"Evil.com."} }),
				names: []string{"cdn.example.net", "EVIL.com."}, ip: "8.8.8.8", port: 443},
			reason: ReasonDeniedByRule, detail: `deny "Evil.com."`,
			allowedBy: "no denied name",
			control: probe{p: egress(func(p *Policy) { p.Deny = []string{"Evil.com."} }),
				names: []string{"cdn.example.net", "evil.org."}, ip: "8.8.8.8", port: 443},
		},
		{
			name:    "deny wildcard below",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"*.evil.com"} }), names: []string{"a.b.evil.com"}, ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "*.evil.com"`,
			allowedBy: "the apex, which the wildcard does not cover",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"*.evil.com"} }), names: []string{"evil.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:    "deny wildcard is label-aligned",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"*.evil.com"} }), names: []string{"x.evil.com"}, ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "*.evil.com"`,
			allowedBy: "a name merely ending in evil.com",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"*.evil.com"} }), names: []string{"xevil.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name: "deny beats allow_only",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"}; p.Deny = []string{"a.com"} }),
				names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
			reason: ReasonDeniedByRule, detail: `deny "a.com"`,
			allowedBy: "no deny",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name: "deny beats allow with a port",
			refused: probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"}; p.Deny = []string{"*.com:22"} }),
				names: []string{"github.com"}, ip: "140.82.112.3", port: 22},
			reason: ReasonDeniedByRule, detail: `deny "*.com:22"`,
			allowedBy: "no deny",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), names: []string{"github.com"}, ip: "140.82.112.3", port: 22},
		},
		{
			name:    "deny CIDR",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"8.8.8.0/24"} }), ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "8.8.8.0/24"`,
			allowedBy: "an address outside",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"8.8.8.0/24"} }), ip: "8.8.4.4", port: 443},
		},
		{
			name:    "deny IPv6 CIDR",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"2606:4700::/32"} }), ip: "2606:4700::1111", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "2606:4700::/32"`,
			allowedBy: "an address outside",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"2606:4700::/32"} }), ip: "2606:4701::1111", port: 443},
		},
		{
			name:    "deny address through NAT64",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"8.8.8.8"} }), ip: "64:ff9b::808:808", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "8.8.8.8"`,
			allowedBy: "another address",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"8.8.8.8"} }), ip: "64:ff9b::808:404", port: 443},
		},
		{
			name:    "deny with a port",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"8.8.8.8:443"} }), ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "8.8.8.8:443"`,
			allowedBy: "another port",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"8.8.8.8:443"} }), ip: "8.8.8.8", port: 80},
		},
		{
			name:    "daemon deny",
			refused: probe{p: egress(nil), lim: Limits{Deny: mustEntries("*.evil.com")}, names: []string{"www.evil.com"}, ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `daemon deny "*.evil.com"`,
			allowedBy: "another name",
			control:   probe{p: egress(nil), lim: Limits{Deny: mustEntries("*.evil.com")}, names: []string{"www.good.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:    "a deny entry that does not parse refuses all",
			refused: probe{p: egress(func(p *Policy) { p.Deny = []string{"10.0.0.0/33"} }), ip: "8.8.8.8", port: 443},
			reason:  ReasonDeniedByRule, detail: `deny "10.0.0.0/33" does not parse`,
			allowedBy: "a valid deny entry",
			control:   probe{p: egress(func(p *Policy) { p.Deny = []string{"10.0.0.0/8"} }), ip: "8.8.8.8", port: 443},
		},
		{
			name:    "allow_only",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"} }), names: []string{"b.com"}, ip: "8.8.8.8", port: 443},
			reason:  ReasonNotAllowed, detail: "no allow_only or allow entry matches port 443",
			allowedBy: "the listed name",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:      "allow_only without names",
			refused:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"} }), ip: "8.8.8.8", port: 443},
			reason:    ReasonNotAllowed,
			allowedBy: "the name known",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:      "allow_only holds to the baseline ports",
			refused:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 22},
			reason:    ReasonNotAllowed,
			allowedBy: "Ports",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"}; p.Ports = []int{22} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 22},
		},
		{
			name:      "allow_only wildcard excludes the apex",
			refused:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"*.example.com"} }), names: []string{"example.com"}, ip: "8.8.8.8", port: 443},
			reason:    ReasonNotAllowed,
			allowedBy: "a name below",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"*.example.com"} }), names: []string{"a.b.example.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:      "allow_only entry with a port",
			refused:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com:8443"} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
			reason:    ReasonNotAllowed,
			allowedBy: "its port",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com:8443"} }), names: []string{"a.com"}, ip: "8.8.8.8", port: 8443},
		},
		{
			name: "allow entries join allow_only, on their own port",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"}; p.Allow = []string{"github.com:22"} }),
				names: []string{"github.com"}, ip: "140.82.112.3", port: 443},
			reason:    ReasonNotAllowed,
			allowedBy: "the allow entry's port",
			control: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"}; p.Allow = []string{"github.com:22"} }),
				names: []string{"github.com"}, ip: "140.82.112.3", port: 22},
		},
		{
			name: "allow_only's own names stay on the baseline ports",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"}; p.Allow = []string{"github.com:22"} }),
				names: []string{"a.com"}, ip: "8.8.8.8", port: 22},
			reason:    ReasonNotAllowed,
			allowedBy: "a baseline port",
			control: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.com"}; p.Allow = []string{"github.com:22"} }),
				names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:      "allow_only by address",
			refused:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"[2606:4700::/32]:8443"} }), ip: "2606:4701::1", port: 8443},
			reason:    ReasonNotAllowed,
			allowedBy: "an address inside",
			control:   probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"[2606:4700::/32]:8443"} }), ip: "2606:4700::1111", port: 8443},
		},
		{
			name:    "daemon allow_only",
			refused: probe{p: egress(nil), lim: Limits{AllowOnly: mustEntries("*.corp.example")}, names: []string{"x.com"}, ip: "8.8.8.8", port: 443},
			reason:  ReasonNotAllowed, detail: "no daemon allow_only entry matches port 443",
			allowedBy: "a listed name",
			control:   probe{p: egress(nil), lim: Limits{AllowOnly: mustEntries("*.corp.example")}, names: []string{"git.corp.example"}, ip: "8.8.8.8", port: 443},
		},
		{
			name: "a sandbox's allow cannot widen the daemon's allow_only",
			refused: probe{p: egress(func(p *Policy) { p.Allow = []string{"b.com:22", "b.com"} }), lim: Limits{AllowOnly: mustEntries("a.com")},
				names: []string{"b.com"}, ip: "8.8.8.8", port: 443},
			reason: ReasonNotAllowed, detail: "daemon allow_only",
			allowedBy: "the daemon's name",
			control: probe{p: egress(func(p *Policy) { p.Allow = []string{"b.com:22", "b.com"} }), lim: Limits{AllowOnly: mustEntries("a.com")},
				names: []string{"a.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name: "a sandbox's allow_only cannot widen the daemon's",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.other.com"} }), lim: Limits{AllowOnly: mustEntries("*.example.com")},
				names: []string{"a.other.com"}, ip: "8.8.8.8", port: 443},
			reason: ReasonNotAllowed, detail: "daemon allow_only",
			allowedBy: "a name in both",
			control: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.example.com"} }), lim: Limits{AllowOnly: mustEntries("*.example.com")},
				names: []string{"a.example.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name: "both allowlists, the sandbox's narrower",
			refused: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.example.com"} }), lim: Limits{AllowOnly: mustEntries("*.example.com")},
				names: []string{"b.example.com"}, ip: "8.8.8.8", port: 443},
			reason: ReasonNotAllowed, detail: "no allow_only or allow entry",
			allowedBy: "the sandbox's name",
			control: probe{p: egress(func(p *Policy) { p.AllowOnly = []string{"a.example.com"} }), lim: Limits{AllowOnly: mustEntries("*.example.com")},
				names: []string{"a.example.com"}, ip: "8.8.8.8", port: 443},
		},
		{
			name:    "allow with a port, by name",
			refused: probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), names: []string{"gitlab.com"}, ip: "8.8.8.8", port: 22},
			reason:  ReasonPortBlocked, detail: "port 22 is not in ports (80, 443)",
			allowedBy: "the allowed name",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), names: []string{"github.com"}, ip: "8.8.8.8", port: 22},
		},
		{
			name:      "allow with a port, by CIDR",
			refused:   probe{p: egress(func(p *Policy) { p.Allow = []string{"140.82.112.0/20:22"} }), ip: "8.8.8.8", port: 22},
			reason:    ReasonPortBlocked,
			allowedBy: "an address inside",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"140.82.112.0/20:22"} }), ip: "140.82.112.3", port: 22},
		},
		{
			name:      "allow with a port, by IPv6 in brackets",
			refused:   probe{p: egress(func(p *Policy) { p.Allow = []string{"[2606:4700::1111]:22"} }), ip: "2606:4700::1112", port: 22},
			reason:    ReasonPortBlocked,
			allowedBy: "the address",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"[2606:4700::1111]:22"} }), ip: "2606:4700::1111", port: 22},
		},
		{
			name:      "allow wildcard with a port",
			refused:   probe{p: egress(func(p *Policy) { p.Allow = []string{"*.example.com:8080"} }), names: []string{"example.com"}, ip: "8.8.8.8", port: 8080},
			reason:    ReasonPortBlocked,
			allowedBy: "a name below",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"*.example.com:8080"} }), names: []string{"api.example.com"}, ip: "8.8.8.8", port: 8080},
		},
		{
			name:      "allow with a port opens only that port",
			refused:   probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), names: []string{"github.com"}, ip: "8.8.8.8", port: 23},
			reason:    ReasonPortBlocked,
			allowedBy: "its port",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), names: []string{"github.com"}, ip: "8.8.8.8", port: 22},
		},
		{
			name:    "Ports replace the baseline",
			refused: probe{p: egress(func(p *Policy) { p.Ports = []int{8080} }), ip: "8.8.8.8", port: 443},
			reason:  ReasonPortBlocked, detail: "port 443 is not in ports (8080)",
			allowedBy: "a listed port",
			control:   probe{p: egress(func(p *Policy) { p.Ports = []int{8080} }), ip: "8.8.8.8", port: 8080},
		},
		{
			name:    "daemon default ports",
			refused: probe{p: egress(nil), lim: Limits{DefaultPorts: []int{443}}, ip: "8.8.8.8", port: 80},
			reason:  ReasonPortBlocked, detail: "port 80 is not in ports (443)",
			allowedBy: "a default port",
			control:   probe{p: egress(nil), lim: Limits{DefaultPorts: []int{443}}, ip: "8.8.8.8", port: 443},
		},
		{
			name:    "port limit holds an unvalidated policy",
			refused: probe{p: egress(func(p *Policy) { p.Ports = []int{25} }), lim: Limits{PortLimit: []int{80, 443}}, ip: "8.8.8.8", port: 25},
			reason:  ReasonPortBlocked, detail: "port 25 is beyond the daemon's egress port limit (80, 443)",
			allowedBy: "a wider limit",
			control:   probe{p: egress(func(p *Policy) { p.Ports = []int{25} }), lim: Limits{PortLimit: []int{25, 80, 443}}, ip: "8.8.8.8", port: 25},
		},
		{
			name:    "port limit holds allow entries",
			refused: probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), lim: Limits{PortLimit: []int{80, 443}}, names: []string{"github.com"}, ip: "8.8.8.8", port: 22},
			reason:  ReasonPortBlocked, detail: "egress port limit",
			allowedBy: "a wider limit",
			control:   probe{p: egress(func(p *Policy) { p.Allow = []string{"github.com:22"} }), lim: Limits{PortLimit: []int{22, 80, 443}}, names: []string{"github.com"}, ip: "8.8.8.8", port: 22},
		},
		{
			name:    "port 0",
			refused: probe{p: egress(func(p *Policy) { p.Ports = []int{0, 443} }), ip: "8.8.8.8", port: 0},
			reason:  ReasonPortBlocked, detail: "port 0 is not between 1 and 65535",
			allowedBy: "a real port",
			control:   probe{p: egress(func(p *Policy) { p.Ports = []int{0, 443} }), ip: "8.8.8.8", port: 443},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.refused.decide(t)
			if got.Allowed || got.Reason != tt.reason || !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("Decide(%+v) = %+v, want refused as %s with detail %q", tt.refused, got, tt.reason, tt.detail)
			}
			if got := tt.control.decide(t); got != (Decision{Allowed: true}) {
				t.Errorf("control (%s): Decide(%+v) = %+v, want allowed", tt.allowedBy, tt.control, got)
			}
		})
	}
}

// TestDecideSpecialRanges: every required range refuses its first, second
// and last address on an open port even with the address in the sandbox's
// allowlist; with the range in Limits.Public, the same probes pass.
func TestDecideSpecialRanges(t *testing.T) {
	t.Parallel()
	for _, s := range specialPrefixes {
		p := netip.MustParsePrefix(s)
		for _, a := range probes(p) {
			pol := egress(func(pol *Policy) { pol.AllowOnly = []string{a.String()} })
			if d := Decide(pol, Limits{}, nil, a, 443); d.Allowed || d.Reason != ReasonSpecialPurpose || d.Detail == "" {
				t.Errorf("Decide(%s:443) = %+v, want special_purpose (in %s)", a, d, p)
			}
			if d := Decide(pol, Limits{Public: []netip.Prefix{p}}, nil, a, 443); !d.Allowed {
				t.Errorf("control: Decide(%s:443) with Public %s = %+v, want allowed", a, p, d)
			}
		}
	}
}

// TestDecideConcurrent: Decide shares nothing between calls (run with
// -race).
func TestDecideConcurrent(t *testing.T) {
	t.Parallel()
	p := egress(func(p *Policy) { p.Deny = []string{"*.evil.com"}; p.Allow = []string{"github.com:22"} })
	lim := Limits{Deny: mustEntries("10.0.0.0/8"), Public: prefixes("198.51.100.0/24"), DefaultPorts: []int{443}}
	names := []string{"GitHub.com"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if d := Decide(p, lim, names, netip.MustParseAddr("198.51.100.7"), 22); !d.Allowed {
					t.Errorf("Decide = %+v", d)
					return
				}
			}
		})
	}
	wg.Wait()
	if names[0] != "GitHub.com" {
		t.Errorf("Decide changed names: %q", names)
	}
}

func mustEntries(s ...string) []Entry {
	es, err := ParseEntries(s)
	if err != nil {
		panic(err)
	}
	return es
}
