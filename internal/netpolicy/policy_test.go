package netpolicy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	limited := Limits{PortLimit: []int{443, 80, 22, 80}}
	many := make([]string, maxListLen+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	manyPorts := make([]int, maxListLen+1)
	for i := range manyPorts {
		manyPorts[i] = i + 1
	}
	for _, tt := range []struct {
		name string
		p    Policy
		lim  Limits
		want map[string]string
	}{
		{name: "zero", p: Policy{}},
		{name: "none", p: Policy{Mode: ModeNone}},
		{name: "egress", p: Policy{Mode: ModeEgress}},
		{name: "every form", p: Policy{
			Mode: ModeEgress,
			Allow: []string{"github.com:22", "*.example.com:8080", "1.2.3.4:22", "10.0.0.0/8:22",
				"[2001:db8::1]:22", "[2001:db8::/32]:22", "Example.COM."},
			Deny:      []string{"*.evil.com", "2001:db8::/32", "1.2.3.4"},
			AllowOnly: []string{"a.com", "_srv.b.com"},
			Ports:     []int{1, 443, 65535},
		}},
		{name: "ports within the limit", lim: limited, p: Policy{
			Mode:  ModeEgress,
			Allow: []string{"github.com:22", "a.com"},
			Ports: []int{80, 443},
		}},
		{name: "deny ports are not held to the limit", lim: limited, p: Policy{
			Mode: ModeEgress,
			Deny: []string{"smtp.example.com:25"},
		}},
		{name: "unknown mode", p: Policy{Mode: "open"}, want: map[string]string{
			"network.mode": "must be none or egress",
		}},
		{name: "mode is case-sensitive", p: Policy{Mode: "Egress"}, want: map[string]string{
			"network.mode": "must be none or egress",
		}},
		{name: "rules with mode none", p: Policy{
			Mode:      ModeNone,
			Allow:     []string{"a.com"},
			Deny:      []string{"b.com"},
			AllowOnly: []string{"c.com"},
			Ports:     []int{443},
		}, want: map[string]string{
			"network.allow":      "rules need mode egress",
			"network.deny":       "rules need mode egress",
			"network.allow_only": "rules need mode egress",
			"network.ports":      "rules need mode egress",
		}},
		{name: "rules with mode empty, and a bad entry", p: Policy{
			Allow: []string{"10.0.0.0/33"},
		}, want: map[string]string{
			"network.allow":    "rules need mode egress",
			"network.allow[0]": `"10.0.0.0/33" is not a valid CIDR`,
		}},
		{name: "bad entries", p: Policy{
			Mode:      ModeEgress,
			Allow:     []string{"a.com", "b.com", "10.0.0.0/33", "exa mple.com", "*.", "*foo.com"},
			Deny:      []string{"10.0.0.1/8", "example.com:0", "example.com:70000"},
			AllowOnly: []string{"", "[example.com]:22"},
		}, want: map[string]string{
			"network.allow[2]":      `"10.0.0.0/33" is not a valid CIDR`,
			"network.allow[3]":      `"exa mple.com" is not a valid domain name`,
			"network.allow[4]":      `"*." is not a valid wildcard; write *. followed by a domain name, as in *.example.com`,
			"network.allow[5]":      `"*foo.com" is not a valid wildcard; write *. followed by a domain name, as in *.example.com`,
			"network.deny[0]":       `"10.0.0.1/8" has host bits set; the prefix is 10.0.0.0/8`,
			"network.deny[1]":       `"example.com:0": port 0 is not between 1 and 65535`,
			"network.deny[2]":       `"example.com:70000": port 70000 is not between 1 and 65535`,
			"network.allow_only[0]": "entry is empty",
			"network.allow_only[1]": `"[example.com]:22" is not a valid IP address`,
		}},
		{name: "bad ports", p: Policy{Mode: ModeEgress, Ports: []int{443, 0, 70000, -1}}, want: map[string]string{
			"network.ports[1]": "port 0 is not between 1 and 65535",
			"network.ports[2]": "port 70000 is not between 1 and 65535",
			"network.ports[3]": "port -1 is not between 1 and 65535",
		}},
		{name: "ports beyond the limit", lim: limited, p: Policy{
			Mode:      ModeEgress,
			Allow:     []string{"smtp.example.com:25", "github.com:22"},
			AllowOnly: []string{"a.com:8080"},
			Ports:     []int{443, 25},
		}, want: map[string]string{
			"network.allow[0]":      `"smtp.example.com:25": port 25 is beyond the daemon's egress port limit (22, 80, 443)`,
			"network.allow_only[0]": `"a.com:8080": port 8080 is beyond the daemon's egress port limit (22, 80, 443)`,
			"network.ports[1]":      "port 25 is beyond the daemon's egress port limit (22, 80, 443)",
		}},
		{name: "lists too long", p: Policy{Mode: ModeEgress, Allow: many, Deny: many[:maxListLen], Ports: manyPorts}, want: map[string]string{
			"network.allow": "has 257 entries; at most 256 are allowed",
			"network.ports": "has 257 entries; at most 256 are allowed",
		}},
		{name: "list too long with mode none", p: Policy{Allow: many}, want: map[string]string{
			"network.allow": "rules need mode egress",
		}},
		{name: "entry too long", p: Policy{Mode: ModeEgress, Deny: []string{long(301)}}, want: map[string]string{
			"network.deny[0]": `"a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a."... is longer than 262 characters`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.p.Validate(tt.lim)
			if !maps.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		in     Policy
		want   Policy
		wantJS string
	}{
		{
			name:   "zero",
			in:     Policy{},
			want:   Policy{Mode: ModeNone},
			wantJS: `{"mode":"none"}`,
		},
		{
			name: "canonical",
			in: Policy{
				Mode:      ModeEgress,
				Allow:     []string{"GitHub.com.:22", "github.com:22", "[2001:DB8:0::1]:22", "1.2.3.4/32", "::ffff:10.0.0.0/104"},
				Deny:      []string{"*.Evil.COM.", "*.evil.com", "2001:db8::/32"},
				AllowOnly: []string{"A.com", "not valid", "not valid"},
				Ports:     []int{443, 80, 443, 8080, 80},
			},
			want: Policy{
				Mode:      ModeEgress,
				Allow:     []string{"github.com:22", "[2001:db8::1]:22", "1.2.3.4", "10.0.0.0/8"},
				Deny:      []string{"*.evil.com", "2001:db8::/32"},
				AllowOnly: []string{"a.com", "not valid"},
				Ports:     []int{80, 443, 8080},
			},
			wantJS: `{"mode":"egress","allow":["github.com:22","[2001:db8::1]:22","1.2.3.4","10.0.0.0/8"],` +
				`"deny":["*.evil.com","2001:db8::/32"],"allow_only":["a.com","not valid"],"ports":[80,443,8080]}`,
		},
		{
			name:   "empty lists become nil",
			in:     Policy{Mode: ModeEgress, Allow: []string{}, Ports: []int{}},
			want:   Policy{Mode: ModeEgress},
			wantJS: `{"mode":"egress"}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before, _ := json.Marshal(tt.in)
			got := tt.in.Normalize()
			if !equalPolicy(got, tt.want) {
				t.Errorf("Normalize() = %+v, want %+v", got, tt.want)
			}
			if js, err := json.Marshal(got); err != nil || string(js) != tt.wantJS {
				t.Errorf("json(Normalize()) = %s, %v; want %s", js, err, tt.wantJS)
			}
			if after, _ := json.Marshal(tt.in); string(after) != string(before) {
				t.Errorf("Normalize changed its receiver: %s, was %s", after, before)
			}
			if again := got.Normalize(); !equalPolicy(again, got) {
				t.Errorf("Normalize() twice = %+v, once %+v", again, got)
			}
		})
	}
}

// equalPolicy compares policies, with nil and empty lists different.
func equalPolicy(a, b Policy) bool {
	eq := func(x, y []string) bool { return slices.Equal(x, y) && (x == nil) == (y == nil) }
	return a.Mode == b.Mode && eq(a.Allow, b.Allow) && eq(a.Deny, b.Deny) && eq(a.AllowOnly, b.AllowOnly) &&
		slices.Equal(a.Ports, b.Ports) && (a.Ports == nil) == (b.Ports == nil)
}

// TestPolicyJSON: the wire names are mode, allow, deny, allow_only, ports.
func TestPolicyJSON(t *testing.T) {
	t.Parallel()
	in := `{"mode":"egress","allow":["github.com:22"],"deny":["*.evil.com"],"allow_only":["a.com"],"ports":[443]}`
	var p Policy
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	if out, _ := json.Marshal(p); string(out) != in {
		t.Errorf("json round trip = %s, want %s", out, in)
	}
	if !p.Egress() || (Policy{}).Egress() || (Policy{Mode: ModeNone}).Egress() {
		t.Error("Egress() wrong")
	}
}

// FuzzValidate: Validate never panics, and a policy it accepts stays
// valid, and unchanged by a second Normalize, once normalized.
func FuzzValidate(f *testing.F) {
	f.Add("egress", "github.com:22", "*.evil.com", "a.com", 443)
	f.Add("none", "", "", "", 0)
	f.Add("egress", "[2001:db8::/32]:22", "10.0.0.1/8", "*.", 70000)
	f.Fuzz(func(t *testing.T, mode, allow, deny, allowOnly string, port int) {
		p := Policy{Mode: mode, Allow: []string{allow}, Deny: []string{deny}, AllowOnly: []string{allowOnly}, Ports: []int{port}}
		if p.Validate(Limits{}) != nil {
			return
		}
		n := p.Normalize()
		if problems := n.Validate(Limits{}); problems != nil {
			t.Fatalf("%+v valid, its normal form %+v not: %v", p, n, problems)
		}
		if again := n.Normalize(); !equalPolicy(again, n) {
			t.Fatalf("Normalize(%+v) = %+v, again %+v", p, n, again)
		}
	})
}
