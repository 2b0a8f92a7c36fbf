package egress

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestNamesBinding(t *testing.T) {
	n := newNames()
	ip := netip.MustParseAddr("198.51.100.7")
	n.bind("a.example", []netip.Addr{ip})
	if !n.bound("a.example", ip) || n.bound("b.example", ip) {
		t.Fatal("binding")
	}
	if got := n.of(ip); len(got) != 1 || got[0] != "a.example" {
		t.Errorf("of = %v", got)
	}
	n.byIP[ip]["a.example"] = time.Now().Add(-time.Second) // expired
	if n.bound("a.example", ip) || len(n.of(ip)) != 0 {
		t.Error("an expired binding still counts")
	}
}

func TestReply(t *testing.T) {
	name := dnsmessage.MustNewName("www.example.")
	q := []dnsmessage.Question{{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}
	b := reply(dnsmessage.Header{ID: 7, RecursionDesired: true}, q, dnsmessage.RCodeSuccess,
		[]netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("198.51.100.8")})
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil || h.ID != 7 || !h.Response || h.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("header %+v, %v", h, err)
	}
	_ = p.SkipAllQuestions()
	answers, err := p.AllAnswers()
	if err != nil || len(answers) != 2 {
		t.Fatalf("answers %v, %v", answers, err)
	}
	if a := answers[0].Body.(*dnsmessage.AResource).A; netip.AddrFrom4(a).String() != "198.51.100.7" || answers[0].Header.TTL != answerTTL {
		t.Errorf("first answer %+v", answers[0])
	}
}
