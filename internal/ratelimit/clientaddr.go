package ratelimit

import (
	"fmt"
	"net/netip"
	"strings"
)

// ClientAddr returns the address a request comes from, given its
// http.Request.RemoteAddr ("ip:port"), its X-Forwarded-For header values
// and the prefixes of the proxies trusted to set that header.
//
// If the peer is not trusted, ClientAddr returns it and ignores
// X-Forwarded-For, which the client may have forged. Otherwise it walks the
// header's comma-separated entries from the right, skipping trusted proxies,
// and returns the first untrusted address. An entry that is not an address
// (with or without a port) ends the walk, and the last good address, the
// peer or the last trusted hop, is returned; so is the leftmost entry if all
// are trusted. IPv4-mapped IPv6 addresses are unmapped and zones dropped.
// ClientAddr returns the zero Addr if remoteAddr is not an address, as for a
// request over a Unix socket.
func ClientAddr(remoteAddr string, xff []string, trusted []netip.Prefix) netip.Addr {
	addr, ok := parseAddr(remoteAddr)
	if !ok || !isTrusted(addr, trusted) {
		return addr
	}
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for {
			j := strings.LastIndexByte(v, ',')
			hop, ok := parseAddr(strings.TrimSpace(v[j+1:]))
			if !ok {
				return addr
			}
			if !isTrusted(hop, trusted) {
				return hop
			}
			addr = hop
			if j < 0 {
				break
			}
			v = v[:j]
		}
	}
	return addr
}

// parseAddr parses "ip" or "ip:port" ("[ip]:port" for IPv6).
func parseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrusted parses a list of trusted proxies, each an IP address
// ("10.0.0.1", "::1") or a CIDR prefix ("10.0.0.0/8", "fd00::/8"). Blank
// entries are skipped. IPv4-mapped IPv6 entries are unmapped, to match
// ClientAddr.
func ParseTrusted(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: want an IP address or CIDR prefix: %w", s, err)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want an IP address or CIDR prefix: %w", s, err)
		}
		if a.Zone() != "" {
			return nil, fmt.Errorf("trusted proxy %q: zones are not allowed", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
