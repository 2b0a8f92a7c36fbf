package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

const (
	// maxDomainLen is the longest DNS name, without its trailing dot.
	maxDomainLen = 253
	// maxEntryLen is the longest entry text: "*." and a longest name, its
	// trailing dot, and ":65535".
	maxEntryLen = 2 + maxDomainLen + 1 + 6
)

// Entry is one parsed destination of Allow, Deny or AllowOnly: a domain
// name, a wildcard below one, an address or a prefix, with an optional port.
// The zero Entry matches nothing.
type Entry struct {
	raw      string       // the text as written, for messages
	domain   string       // lowercase, no trailing dot; for a wildcard, the name below which it matches
	wildcard bool         // whether domain is "*." + domain
	prefix   netip.Prefix // for address (full-length prefix) and CIDR entries; invalid for domains
	port     int          // 0 for any port of the baseline
}

// ParseEntry parses one entry (see the package documentation for the
// grammar). The error quotes the entry and says what is wrong with it.
func ParseEntry(s string) (Entry, error) {
	if s == "" {
		return Entry{}, errors.New("entry is empty")
	}
	if len(s) > maxEntryLen {
		return Entry{}, fmt.Errorf("%q... is longer than %d characters", s[:32], maxEntryLen)
	}
	e := Entry{raw: s}
	host, port, hasPort, bracketed, err := splitPort(s)
	if err != nil {
		return Entry{}, err
	}
	if hasPort {
		if e.port, err = parsePort(s, port); err != nil {
			return Entry{}, err
		}
	}
	switch {
	case strings.Contains(host, "/"):
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return Entry{}, fmt.Errorf("%q is not a valid CIDR", s)
		}
		if m := p.Masked(); m != p {
			return Entry{}, fmt.Errorf("%q has host bits set; the prefix is %s", s, m)
		}
		e.prefix = unmapPrefix(p)
	case bracketed || strings.Contains(host, ":"):
		a, err := netip.ParseAddr(host)
		if err != nil {
			return Entry{}, fmt.Errorf("%q is not a valid IP address", s)
		}
		if a.Zone() != "" {
			return Entry{}, fmt.Errorf("%q: IPv6 zones are not allowed", s)
		}
		a = a.Unmap()
		e.prefix = netip.PrefixFrom(a, a.BitLen())
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			e.prefix = netip.PrefixFrom(a, a.BitLen())
			break
		}
		if err := e.parseDomain(host); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// ParseEntries parses a list of entries, such as a daemon flag's values.
// The error names the first bad entry and its index.
func ParseEntries(list []string) ([]Entry, error) {
	entries := make([]Entry, 0, len(list))
	for i, s := range list {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// String returns the entry as it was written.
func (e Entry) String() string { return e.raw }

// canonical returns the entry's canonical text: lowercase, without a
// trailing dot, addresses in their canonical form, an address with a full
// prefix length written as the address, and IPv6 in brackets when a port
// follows.
func (e Entry) canonical() string {
	var host string
	switch {
	case e.domain != "" && e.wildcard:
		host = "*." + e.domain
	case e.domain != "":
		host = e.domain
	case e.prefix.IsSingleIP():
		host = e.prefix.Addr().String()
	default:
		host = e.prefix.String()
	}
	if e.port == 0 {
		return host
	}
	if e.prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(e.port)
}

// matches reports whether the destination matches the entry, port aside: a
// domain entry if one of names does, an address or prefix entry if ip is in
// it. names must be lowercase without a trailing dot; ip must be unmapped.
func (e Entry) matches(names []string, ip netip.Addr) bool {
	if e.prefix.IsValid() {
		return e.prefix.Contains(ip)
	}
	if e.domain == "" {
		return false
	}
	for _, n := range names {
		if e.wildcard {
			if len(n) > len(e.domain)+1 && strings.HasSuffix(n, e.domain) && n[len(n)-len(e.domain)-1] == '.' {
				return true
			}
		} else if n == e.domain {
			return true
		}
	}
	return false
}

// splitPort splits s into its host and port text. An IPv6 address or prefix
// takes a port only in brackets; without brackets, more than one colon means
// IPv6 without a port.
func splitPort(s string) (host, port string, hasPort, bracketed bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, false, fmt.Errorf("%q has no closing ]", s)
		}
		host, rest := s[1:end], s[end+1:]
		switch {
		case rest == "":
			return host, "", false, true, nil
		case rest[0] == ':':
			return host, rest[1:], true, true, nil
		default:
			return "", "", false, false, fmt.Errorf("%q has text after ] that is not a :port", s)
		}
	}
	if strings.Count(s, ":") == 1 {
		host, port, _ = strings.Cut(s, ":")
		return host, port, true, false, nil
	}
	return s, "", false, false, nil
}

// parsePort parses the port text of entry s.
func parsePort(s, port string) (int, error) {
	if port == "" {
		return 0, fmt.Errorf("%q has no port after the colon", s)
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: port %q is not a number", s, port)
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q: port %s is not between 1 and 65535", s, port)
	}
	return n, nil
}

// parseDomain sets e's domain (and wildcard) from host, the entry without
// its port.
func (e *Entry) parseDomain(host string) error {
	name := strings.TrimSuffix(host, ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.wildcard = true
		name = rest
	}
	if strings.Contains(name, "*") || (e.wildcard && name == "") {
		return fmt.Errorf("%q is not a valid wildcard; write *. followed by a domain name, as in *.example.com", e.raw)
	}
	if !validDomain(name) {
		if lastLabelNumeric(name) {
			return fmt.Errorf("%q is not a valid IP address", e.raw)
		}
		return fmt.Errorf("%q is not a valid domain name", e.raw)
	}
	e.domain = strings.ToLower(name)
	return nil
}

// validDomain reports whether name (without a trailing dot) is a DNS name:
// at most 253 characters of labels of 1-63 letters, digits, hyphens and
// underscores, no label starting or ending with a hyphen. A name whose last
// label is all digits is refused: no top-level domain is, and such a name
// is a mistyped IPv4 address (010.0.0.1, 10.0.0.300).
func validDomain(name string) bool {
	if name == "" || len(name) > maxDomainLen || lastLabelNumeric(name) {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// lastLabelNumeric reports whether the last label of name is all digits.
func lastLabelNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// unmapPrefix turns a prefix inside ::ffff:0:0/96 into the IPv4 prefix it
// stands for, so that it matches unmapped addresses.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}
