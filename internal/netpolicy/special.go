package netpolicy

import (
	"fmt"
	"net/netip"
)

// specialRange is one row of the special-purpose table.
type specialRange struct {
	prefix netip.Prefix
	name   string
	// embedded, when set, makes the range a translation of IPv4: an
	// address in it is decided on the IPv4 address it embeds.
	embedded func(netip.Addr) netip.Addr
}

// specialRanges are the addresses no sandbox may reach, whatever its rules:
// the IANA IPv4 and IPv6 Special-Purpose Address Registries, whole (also
// the rows the registries mark globally reachable, such as the anycast
// services in 192.0.0.0/24 and 2001::/23: a sandbox has no business with
// them), plus IPv4 multicast, IPv6 site-local and IPv6 multicast. Rows may
// nest; the most specific row names an address. Any IPv6 address outside
// 2000::/3 (global unicast) is special too, named by a row where one fits.
//
// Sources: https://www.iana.org/assignments/iana-ipv4-special-registry and
// https://www.iana.org/assignments/iana-ipv6-special-registry.
var specialRanges = []specialRange{
	// IPv4.
	{prefix: pfx("0.0.0.0/8"), name: "this network"},
	{prefix: pfx("0.0.0.0/32"), name: "this host on this network"},
	{prefix: pfx("10.0.0.0/8"), name: "private-use"},
	{prefix: pfx("100.64.0.0/10"), name: "shared address space"},
	{prefix: pfx("127.0.0.0/8"), name: "loopback"},
	{prefix: pfx("169.254.0.0/16"), name: "link-local"},
	{prefix: pfx("172.16.0.0/12"), name: "private-use"},
	{prefix: pfx("192.0.0.0/24"), name: "IETF protocol assignments"},
	{prefix: pfx("192.0.0.0/29"), name: "IPv4 service continuity prefix"},
	{prefix: pfx("192.0.0.8/32"), name: "IPv4 dummy address"},
	{prefix: pfx("192.0.0.9/32"), name: "port control protocol anycast"},
	{prefix: pfx("192.0.0.10/32"), name: "TURN anycast"},
	{prefix: pfx("192.0.0.170/32"), name: "NAT64/DNS64 discovery"},
	{prefix: pfx("192.0.0.171/32"), name: "NAT64/DNS64 discovery"},
	{prefix: pfx("192.0.2.0/24"), name: "documentation (TEST-NET-1)"},
	{prefix: pfx("192.31.196.0/24"), name: "AS112-v4"},
	{prefix: pfx("192.52.193.0/24"), name: "AMT"},
	{prefix: pfx("192.88.99.0/24"), name: "deprecated 6to4 relay anycast"},
	{prefix: pfx("192.168.0.0/16"), name: "private-use"},
	{prefix: pfx("192.175.48.0/24"), name: "direct delegation AS112 service"},
	{prefix: pfx("198.18.0.0/15"), name: "benchmarking"},
	{prefix: pfx("198.51.100.0/24"), name: "documentation (TEST-NET-2)"},
	{prefix: pfx("203.0.113.0/24"), name: "documentation (TEST-NET-3)"},
	{prefix: pfx("224.0.0.0/4"), name: "multicast"},
	{prefix: pfx("240.0.0.0/4"), name: "reserved"},
	{prefix: pfx("255.255.255.255/32"), name: "limited broadcast"},

	// IPv6.
	{prefix: pfx("::/96"), name: "IPv4-compatible (deprecated)"},
	{prefix: pfx("::/128"), name: "unspecified"},
	{prefix: pfx("::1/128"), name: "loopback"},
	{prefix: pfx("::ffff:0:0/96"), name: "IPv4-mapped", embedded: netip.Addr.Unmap},
	{prefix: pfx("64:ff9b::/96"), name: "NAT64", embedded: nat64IPv4},
	{prefix: pfx("64:ff9b:1::/48"), name: "local-use NAT64"},
	{prefix: pfx("100::/64"), name: "discard-only"},
	{prefix: pfx("100:0:0:1::/64"), name: "dummy IPv6 prefix"},
	{prefix: pfx("2001::/23"), name: "IETF protocol assignments"},
	{prefix: pfx("2001::/32"), name: "Teredo"},
	{prefix: pfx("2001:1::1/128"), name: "port control protocol anycast"},
	{prefix: pfx("2001:1::2/128"), name: "TURN anycast"},
	{prefix: pfx("2001:1::3/128"), name: "DNS-SD service registration protocol anycast"},
	{prefix: pfx("2001:2::/48"), name: "benchmarking"},
	{prefix: pfx("2001:3::/32"), name: "AMT"},
	{prefix: pfx("2001:4:112::/48"), name: "AS112-v6"},
	{prefix: pfx("2001:10::/28"), name: "deprecated ORCHID"},
	{prefix: pfx("2001:20::/28"), name: "ORCHIDv2"},
	{prefix: pfx("2001:30::/28"), name: "drone remote ID protocol entity tags"},
	{prefix: pfx("2001:db8::/32"), name: "documentation"},
	{prefix: pfx("2002::/16"), name: "6to4", embedded: sixToFourIPv4},
	{prefix: pfx("2620:4f:8000::/48"), name: "direct delegation AS112 service"},
	{prefix: pfx("3fff::/20"), name: "documentation"},
	{prefix: pfx("5f00::/16"), name: "segment routing (SRv6) SIDs"},
	{prefix: pfx("fc00::/7"), name: "unique-local"},
	{prefix: pfx("fe80::/10"), name: "link-local"},
	{prefix: pfx("fec0::/10"), name: "site-local (deprecated)"},
	{prefix: pfx("ff00::/8"), name: "multicast"},
}

var (
	globalUnicast = pfx("2000::/3")
	nat64Prefix   = pfx("64:ff9b::/96")
	sixToFour     = pfx("2002::/16")
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// SpecialPurpose reports whether ip is a special-purpose address no sandbox
// may reach, and if so names its range, as in "169.254.0.0/16 (link-local)".
// An IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
// address is decided on the IPv4 address it embeds; an IPv6 address outside
// 2000::/3 is always special. An invalid address is special. It is safe for
// concurrent use.
func SpecialPurpose(ip netip.Addr) (name string, ok bool) {
	return special(ip, nil)
}

// special is SpecialPurpose with public prefixes taken as public, at every
// level of embedding.
func special(ip netip.Addr, public []netip.Prefix) (string, bool) {
	ip = ip.WithZone("")
	if !ip.IsValid() {
		return "invalid address", true
	}
	if inAny(public, ip) {
		return "", false
	}
	var best *specialRange
	for i := range specialRanges {
		r := &specialRanges[i]
		if r.prefix.Contains(ip) && (best == nil || r.prefix.Bits() > best.prefix.Bits()) {
			best = r
		}
	}
	switch {
	case best != nil && best.embedded != nil:
		inner, ok := special(best.embedded(ip), public)
		if !ok {
			return "", false
		}
		return fmt.Sprintf("%s (%s) embedding %s", best.prefix, best.name, inner), true
	case best != nil:
		return fmt.Sprintf("%s (%s)", best.prefix, best.name), true
	case ip.Is6() && !globalUnicast.Contains(ip):
		return "outside 2000::/3 (not global unicast)", true
	}
	return "", false
}

// embeddedIPv4 returns the IPv4 address a NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) address embeds: a connection to it reaches that address.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	switch {
	case nat64Prefix.Contains(ip):
		return nat64IPv4(ip), true
	case sixToFour.Contains(ip):
		return sixToFourIPv4(ip), true
	}
	return netip.Addr{}, false
}

// nat64IPv4 returns the IPv4 address in the last 32 bits of ip (RFC 6052).
func nat64IPv4(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[12:16]))
}

// sixToFourIPv4 returns the IPv4 address in bits 16-48 of ip (RFC 3056).
func sixToFourIPv4(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[2:6]))
}

// inAny reports whether ip is in one of prefixes; IPv4-mapped prefixes
// count as the IPv4 prefixes they stand for.
func inAny(prefixes []netip.Prefix, ip netip.Addr) bool {
	for _, p := range prefixes {
		if unmapPrefix(p).Contains(ip) {
			return true
		}
	}
	return false
}
