package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

// specialPrefixes are the ranges the brief requires blocked, written out
// here independently of the table so that a row dropped from it fails.
var specialPrefixes = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24",
	"192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
	"224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",

	"::/128", "::1/128", "::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
	"2001::/23", "2001::/32", "2001:2::/48", "2001:3::/32", "2001:4:112::/48", "2001:10::/28",
	"2001:20::/28", "2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20", "5f00::/16",
	"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	// Outside 2000::/3.
	"::/3", "4000::/2", "8000::/1",
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// probes returns the first, second and last addresses of p.
func probes(p netip.Prefix) []netip.Addr {
	if p.IsSingleIP() {
		return []netip.Addr{p.Addr()}
	}
	return []netip.Addr{p.Addr(), p.Addr().Next(), lastAddr(p)}
}

// TestSpecialPurpose: the first, second and last address of every required
// range, and of every row of the table, are special; with the range listed
// in Limits.Public, the same addresses pass (the positive control).
func TestSpecialPurpose(t *testing.T) {
	t.Parallel()
	var ranges []netip.Prefix
	for _, s := range specialPrefixes {
		ranges = append(ranges, netip.MustParsePrefix(s))
	}
	for _, r := range specialRanges {
		ranges = append(ranges, r.prefix)
	}
	for _, p := range ranges {
		for _, a := range probes(p) {
			if !p.Contains(a) {
				t.Fatalf("probe %s not in %s", a, p)
			}
			if name, ok := SpecialPurpose(a); !ok || name == "" {
				t.Errorf("SpecialPurpose(%s) = %q, %t; want it special (in %s)", a, name, ok, p)
			}
			if a.Is4() {
				if _, ok := SpecialPurpose(netip.AddrFrom16(a.As16())); !ok {
					t.Errorf("SpecialPurpose(%s) not special, though %s is", netip.AddrFrom16(a.As16()), a)
				}
			}
			if name, ok := special(a, []netip.Prefix{p}); ok {
				t.Errorf("special(%s, public %s) = %q, want it public", a, p, name)
			}
		}
	}
}

// TestSpecialPurposeNames: the most specific range names an address, and
// translated addresses are decided, and named, on the IPv4 they embed.
func TestSpecialPurposeNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ip, want string // want "" for a public address
	}{
		{"169.254.169.254", "169.254.0.0/16 (link-local)"},
		{"0.0.0.0", "0.0.0.0/32 (this host on this network)"},
		{"0.1.2.3", "0.0.0.0/8 (this network)"},
		{"10.1.2.3", "10.0.0.0/8 (private-use)"},
		{"100.100.100.200", "100.64.0.0/10 (shared address space)"},
		{"127.0.0.1", "127.0.0.0/8 (loopback)"},
		{"192.0.0.9", "192.0.0.9/32 (port control protocol anycast)"},
		{"192.0.0.192", "192.0.0.0/24 (IETF protocol assignments)"},
		{"192.0.2.1", "192.0.2.0/24 (documentation (TEST-NET-1))"},
		{"198.19.255.255", "198.18.0.0/15 (benchmarking)"},
		{"239.255.255.250", "224.0.0.0/4 (multicast)"},
		{"255.255.255.254", "240.0.0.0/4 (reserved)"},
		{"255.255.255.255", "255.255.255.255/32 (limited broadcast)"},
		{"::", "::/128 (unspecified)"},
		{"::1", "::1/128 (loopback)"},
		{"::a9fe:a9fe", "::/96 (IPv4-compatible (deprecated))"},
		{"::ffff:169.254.169.254", "::ffff:0.0.0.0/96 (IPv4-mapped) embedding 169.254.0.0/16 (link-local)"},
		{"::ffff:127.0.0.1", "::ffff:0.0.0.0/96 (IPv4-mapped) embedding 127.0.0.0/8 (loopback)"},
		{"64:ff9b::a9fe:a9fe", "64:ff9b::/96 (NAT64) embedding 169.254.0.0/16 (link-local)"},
		{"64:ff9b::7f00:1", "64:ff9b::/96 (NAT64) embedding 127.0.0.0/8 (loopback)"},
		{"64:ff9b:1::808:808", "64:ff9b:1::/48 (local-use NAT64)"},
		{"2002:a9fe:a9fe::1", "2002::/16 (6to4) embedding 169.254.0.0/16 (link-local)"},
		{"2002:0a00:0001::1", "2002::/16 (6to4) embedding 10.0.0.0/8 (private-use)"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32 (Teredo)"},
		{"2001:1::1", "2001:1::1/128 (port control protocol anycast)"},
		{"2001:1::4", "2001::/23 (IETF protocol assignments)"},
		{"2001:db8::1", "2001:db8::/32 (documentation)"},
		{"3fff::1", "3fff::/20 (documentation)"},
		{"fd00:ec2::254", "fc00::/7 (unique-local)"},
		{"fe80::1", "fe80::/10 (link-local)"},
		{"fe80::1%eth0", "fe80::/10 (link-local)"},
		{"ff02::1", "ff00::/8 (multicast)"},
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "outside 2000::/3 (not global unicast)"},
		{"4000::1", "outside 2000::/3 (not global unicast)"},

		// Public: the controls, and the neighbours of the ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"1.0.0.0", ""},
		{"9.255.255.255", ""},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"126.255.255.255", ""},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.255.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"192.0.1.0", ""},
		{"192.0.3.0", ""},
		{"192.167.255.255", ""},
		{"192.169.0.0", ""},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"198.51.99.255", ""},
		{"198.51.101.0", ""},
		{"203.0.112.255", ""},
		{"203.0.114.0", ""},
		{"223.255.255.255", ""},
		{"2606:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"2001:200::1", ""},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:db9::", ""},
		{"2003::1", ""},
		{"2620:4f:8001::", ""},
		{"3fff:1000::", ""},
		{"3ffe:ffff::1", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2002:0808:0808::1", ""},
	} {
		ip := netip.MustParseAddr(tt.ip)
		name, ok := SpecialPurpose(ip)
		if name != tt.want || ok != (tt.want != "") {
			t.Errorf("SpecialPurpose(%s) = %q, %t; want %q", tt.ip, name, ok, tt.want)
		}
	}
	if name, ok := SpecialPurpose(netip.Addr{}); !ok || name != "invalid address" {
		t.Errorf("SpecialPurpose(invalid) = %q, %t; want it special", name, ok)
	}
}

// TestSpecialRangesTable: the table's rows are canonical prefixes, named,
// and the IPv4 rows are IPv4.
func TestSpecialRangesTable(t *testing.T) {
	t.Parallel()
	seen := map[netip.Prefix]bool{}
	for _, r := range specialRanges {
		if r.prefix != r.prefix.Masked() || r.name == "" || seen[r.prefix] || strings.ContainsAny(r.name, "\n") {
			t.Errorf("bad row %s %q", r.prefix, r.name)
		}
		if r.prefix.Addr().Is4In6() && r.embedded == nil {
			t.Errorf("row %s is an IPv4-mapped prefix; write it as IPv4", r.prefix)
		}
		seen[r.prefix] = true
	}
}

// FuzzSpecialPurpose: an IPv4 address and its mapped form agree; IPv6
// outside 2000::/3 is always special, but for NAT64; a translated address is special
// whenever the IPv4 it embeds is.
func FuzzSpecialPurpose(f *testing.F) {
	for _, s := range []string{"8.8.8.8", "169.254.169.254", "64:ff9b::808:808", "2002:a9fe:a9fe::1", "fe80::1"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		_, blocked := SpecialPurpose(ip)
		if ip.Is4() {
			if _, m := SpecialPurpose(netip.AddrFrom16(ip.As16())); m != blocked {
				t.Fatalf("SpecialPurpose(%s) = %t, of its mapped form %t", ip, blocked, m)
			}
			return
		}
		_, translated := embeddedIPv4(ip)
		if !ip.Is4In6() && !translated && !globalUnicast.Contains(ip) && !blocked {
			t.Fatalf("SpecialPurpose(%s) = false outside 2000::/3", ip)
		}
		if v4, ok := embeddedIPv4(ip); ok {
			if _, inner := SpecialPurpose(v4); inner && !blocked {
				t.Fatalf("SpecialPurpose(%s) = false, though it embeds special %s", ip, v4)
			}
		}
	})
}
