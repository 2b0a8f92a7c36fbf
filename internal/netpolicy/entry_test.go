package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

// TestParseEntry: every form of the grammar parses to its canonical text,
// and every malformed entry is refused with a message quoting it.
func TestParseEntry(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in        string
		canonical string // "" when the entry is refused
		err       string // a substring of the error
	}{
		{in: "example.com", canonical: "example.com"},
		{in: "Example.COM.", canonical: "example.com"},
		{in: "localhost", canonical: "localhost"},
		{in: "_acme-challenge.example.com", canonical: "_acme-challenge.example.com"},
		{in: "xn--bcher-kva.example", canonical: "xn--bcher-kva.example"},
		{in: "*.Example.com", canonical: "*.example.com"},
		{in: "*.example.com.", canonical: "*.example.com"},
		{in: "example.com:22", canonical: "example.com:22"},
		{in: "example.com.:22", canonical: "example.com:22"},
		{in: "*.example.com:8080", canonical: "*.example.com:8080"},
		{in: "1.2.3.4", canonical: "1.2.3.4"},
		{in: "1.2.3.4/32", canonical: "1.2.3.4"},
		{in: "1.2.3.4:22", canonical: "1.2.3.4:22"},
		{in: "10.0.0.0/8", canonical: "10.0.0.0/8"},
		{in: "10.0.0.0/8:22", canonical: "10.0.0.0/8:22"},
		{in: "2001:DB8::1", canonical: "2001:db8::1"},
		{in: "2001:db8:0:0::1/128", canonical: "2001:db8::1"},
		{in: "2001:db8::/32", canonical: "2001:db8::/32"},
		{in: "[2001:db8::1]:22", canonical: "[2001:db8::1]:22"},
		{in: "[2001:db8::/32]:22", canonical: "[2001:db8::/32]:22"},
		{in: "[2001:db8::1]", canonical: "2001:db8::1"},
		{in: "[1.2.3.4]:22", canonical: "1.2.3.4:22"},
		{in: "::ffff:1.2.3.4", canonical: "1.2.3.4"},
		{in: "::ffff:10.0.0.0/104", canonical: "10.0.0.0/8"},
		{in: "example.com:65535", canonical: "example.com:65535"},
		{in: strings.Repeat("a", 63) + ".com", canonical: strings.Repeat("a", 63) + ".com"},
		{in: "*." + long(253) + ".:1", canonical: "*." + long(253) + ":1"},

		{in: "", err: "entry is empty"},
		{in: "10.0.0.0/33", err: `"10.0.0.0/33" is not a valid CIDR`},
		{in: "10.0.0.1/8", err: `"10.0.0.1/8" has host bits set; the prefix is 10.0.0.0/8`},
		{in: "2001:db8::1/32", err: `has host bits set; the prefix is 2001:db8::/32`},
		{in: "example.com/8", err: `"example.com/8" is not a valid CIDR`},
		{in: "exa mple.com", err: `"exa mple.com" is not a valid domain name`},
		{in: "*.", err: `"*." is not a valid wildcard`},
		{in: "*", err: `"*" is not a valid wildcard`},
		{in: "*foo.com", err: `"*foo.com" is not a valid wildcard`},
		{in: "foo.*.com", err: `is not a valid wildcard`},
		{in: "*.*.com", err: `is not a valid wildcard`},
		{in: "-foo.com", err: "is not a valid domain name"},
		{in: "foo-.com", err: "is not a valid domain name"},
		{in: "foo..com", err: "is not a valid domain name"},
		{in: ".", err: "is not a valid domain name"},
		{in: "example.com..", err: "is not a valid domain name"},
		{in: "bücher.example", err: "is not a valid domain name"},
		{in: strings.Repeat("a", 64) + ".com", err: "is not a valid domain name"},
		{in: long(255), err: "is not a valid domain name"},
		{in: long(400), err: "is longer than 262 characters"},
		{in: "10.0.0.300", err: `"10.0.0.300" is not a valid IP address`},
		{in: "010.0.0.1", err: `"010.0.0.1" is not a valid IP address`},
		{in: "2001:db8::g", err: "is not a valid IP address"},
		{in: "fe80::1%eth0", err: "IPv6 zones are not allowed"},
		{in: "[example.com]:22", err: "is not a valid IP address"},
		{in: "[2001:db8::1", err: "has no closing ]"},
		{in: "[2001:db8::1]22", err: "is not a :port"},
		{in: "example.com:0", err: `"example.com:0": port 0 is not between 1 and 65535`},
		{in: "example.com:70000", err: `"example.com:70000": port 70000 is not between 1 and 65535`},
		{in: "example.com:99999999999999999999", err: "is not between 1 and 65535"},
		{in: "example.com:-1", err: `port "-1" is not a number`},
		{in: "example.com:+22", err: `port "+22" is not a number`},
		{in: "example.com:ssh", err: `port "ssh" is not a number`},
		{in: "example.com:", err: "has no port after the colon"},
		{in: ":22", err: "is not a valid domain name"},
	} {
		e, err := ParseEntry(tt.in)
		switch {
		case tt.canonical != "" && err != nil:
			t.Errorf("ParseEntry(%q) = %v, want %q", tt.in, err, tt.canonical)
		case tt.canonical != "" && e.canonical() != tt.canonical:
			t.Errorf("ParseEntry(%q).canonical() = %q, want %q", tt.in, e.canonical(), tt.canonical)
		case tt.canonical != "" && e.String() != tt.in:
			t.Errorf("ParseEntry(%q).String() = %q, want the entry as written", tt.in, e.String())
		case tt.canonical == "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseEntry(%q) = %q, %v; want an error with %q", tt.in, e.canonical(), err, tt.err)
		}
	}
}

// long returns a valid-looking domain name of n characters, in one- and
// two-letter labels.
func long(n int) string {
	if n%2 == 1 {
		return strings.Repeat("a.", n/2) + "a"
	}
	return "bb" + strings.Repeat(".a", (n-2)/2)
}

func TestLong(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 63, 64, 253, 254, 255, 400} {
		if s := long(n); len(s) != n || !validDomain(s) && n <= 253 {
			t.Errorf("long(%d) = %q (%d characters, valid %t)", n, s, len(s), validDomain(s))
		}
	}
}

func TestParseEntries(t *testing.T) {
	t.Parallel()
	entries, err := ParseEntries([]string{"*.evil.com", "10.0.0.0/8:22"})
	if err != nil || len(entries) != 2 || entries[0].String() != "*.evil.com" || entries[1].canonical() != "10.0.0.0/8:22" {
		t.Errorf("ParseEntries(good) = %v, %v", entries, err)
	}
	_, err = ParseEntries([]string{"a.com", "b.com", "exa mple.com"})
	if want := `entry 2: "exa mple.com" is not a valid domain name`; err == nil || err.Error() != want {
		t.Errorf("ParseEntries(bad) = %v, want %q", err, want)
	}
	if entries, err := ParseEntries(nil); err != nil || len(entries) != 0 {
		t.Errorf("ParseEntries(nil) = %v, %v", entries, err)
	}
}

// TestEntryMatches: exact names match only themselves, wildcards match
// strictly below their name at any depth, prefixes match their addresses
// and no address of the other family.
func TestEntryMatches(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		entry string
		names []string
		ip    string
		want  bool
	}{
		{"example.com", []string{"example.com"}, "8.8.8.8", true},
		{"EXAMPLE.com.", []string{"example.com"}, "8.8.8.8", true},
		{"example.com", []string{"a.example.com"}, "8.8.8.8", false},
		{"example.com", []string{"other.com", "example.com"}, "8.8.8.8", true},
		{"example.com", nil, "8.8.8.8", false},
		{"*.example.com", []string{"a.example.com"}, "8.8.8.8", true},
		{"*.example.com", []string{"a.b.c.example.com"}, "8.8.8.8", true},
		{"*.example.com", []string{"example.com"}, "8.8.8.8", false},
		{"*.example.com", []string{"badexample.com"}, "8.8.8.8", false},
		{"*.example.com", []string{"a.example.com.evil.org"}, "8.8.8.8", false},
		{"*.example.com", []string{"com"}, "8.8.8.8", false},
		{"*.com", []string{"example.com"}, "8.8.8.8", true},
		{"example.com", []string{"8.8.8.8"}, "1.1.1.1", false},
		{"8.8.8.8", []string{"example.com"}, "8.8.8.8", true},
		{"8.8.8.8", []string{"8.8.8.8"}, "8.8.4.4", false},
		{"8.8.8.0/24", nil, "8.8.8.255", true},
		{"8.8.8.0/24", nil, "8.8.9.0", false},
		{"::ffff:8.8.8.8", nil, "8.8.8.8", true},
		{"2606:4700::/32", nil, "2606:4700::1111", true},
		{"2606:4700::/32", nil, "2606:4701::1", false},
		{"::/0", nil, "8.8.8.8", false},
		{"0.0.0.0/0", nil, "2606:4700::1111", false},
		{"0.0.0.0/0", nil, "8.8.8.8", true},
	} {
		e, err := ParseEntry(tt.entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.matches(tt.names, netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("ParseEntry(%q).matches(%q, %s) = %t, want %t", tt.entry, tt.names, tt.ip, got, tt.want)
		}
	}
	if (Entry{}).matches([]string{""}, netip.MustParseAddr("8.8.8.8")) {
		t.Error("the zero Entry matched")
	}
}

// FuzzParseEntry: an accepted entry's canonical text parses to the same
// entry and is its own canonical text.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"example.com", "*.Example.com.:22", "10.0.0.0/8:22", "[2001:db8::/32]:22",
		"::ffff:1.2.3.4", "10.0.0.300", "[::1]", "a:b:c", "*.", "example.com:070"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		c := e.canonical()
		e2, err := ParseEntry(c)
		if err != nil {
			t.Fatalf("ParseEntry(%q) ok, but its canonical %q: %v", s, c, err)
		}
		if e2.canonical() != c {
			t.Fatalf("canonical(%q) = %q, canonical of that = %q", s, c, e2.canonical())
		}
		e2.raw = e.raw
		if e2 != e {
			t.Fatalf("ParseEntry(%q) = %+v, of its canonical %q = %+v", s, e, c, e2)
		}
		if len(s) > maxEntryLen {
			t.Fatalf("ParseEntry accepted %d characters", len(s))
		}
	})
}
