package netpolicy

import "testing"

func TestDecideName(t *testing.T) {
	lim := Limits{}
	for _, tc := range []struct {
		name    string
		p       Policy
		host    string
		allowed bool
	}{
		{"open egress", Policy{Mode: ModeEgress}, "example.com", true},
		{"mode none", Policy{}, "example.com", false},
		{"denied exactly", Policy{Mode: ModeEgress, Deny: []string{"evil.com"}}, "evil.com", false},
		{"denied by wildcard", Policy{Mode: ModeEgress, Deny: []string{"*.evil.com"}}, "a.b.evil.com", false},
		{"wildcard spares the apex", Policy{Mode: ModeEgress, Deny: []string{"*.evil.com"}}, "evil.com", true},
		{"deny with a port leaves the name", Policy{Mode: ModeEgress, Deny: []string{"evil.com:25"}}, "evil.com", true},
		{"allowlisted", Policy{Mode: ModeEgress, AllowOnly: []string{"*.github.com"}}, "api.github.com", true},
		{"not allowlisted", Policy{Mode: ModeEgress, AllowOnly: []string{"*.github.com"}}, "secret.attacker.example", false},
		{"allow extends the allowlist", Policy{Mode: ModeEgress, AllowOnly: []string{"a.com"}, Allow: []string{"b.com:22"}}, "b.com", true},
		{"an address entry may match any name", Policy{Mode: ModeEgress, AllowOnly: []string{"203.0.113.0/24"}}, "x.example", true},
		{"deny wins over the allowlist", Policy{Mode: ModeEgress, AllowOnly: []string{"*.github.com"}, Deny: []string{"gist.github.com"}}, "gist.github.com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := DecideName(tc.p, lim, tc.host); d.Allowed != tc.allowed {
				t.Fatalf("DecideName(%s) = %+v, want allowed %v", tc.host, d, tc.allowed)
			}
		})
	}
	daemon := Limits{Deny: mustEntries("*.internal.example"), AllowOnly: mustEntries("*.example")}
	if d := DecideName(Policy{Mode: ModeEgress}, daemon, "db.internal.example"); d.Allowed {
		t.Fatalf("daemon deny: %+v", d)
	}
	if d := DecideName(Policy{Mode: ModeEgress}, daemon, "www.other.org"); d.Allowed {
		t.Fatalf("daemon allowlist: %+v", d)
	}
	if d := DecideName(Policy{Mode: ModeEgress}, daemon, "www.example"); !d.Allowed {
		t.Fatalf("positive control: %+v", d)
	}
}
