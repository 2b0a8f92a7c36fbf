package egress

import (
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		send      func(c net.Conn)
		wantProto string
		wantName  string
	}{
		{"tls sni", func(c net.Conn) {
			_ = tls.Client(c, &tls.Config{ServerName: "API.Example.com"}).Handshake()
		}, "tls", "api.example.com"},
		{"tls without sni", func(c net.Conn) {
			_ = tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake()
		}, "tls", ""},
		{"http host", func(c net.Conn) {
			c.Write([]byte("GET / HTTP/1.1\r\nHost: www.Example.com.:8080\r\n\r\n"))
		}, "http", "www.example.com"},
		{"http ip literal host", func(c net.Conn) {
			c.Write([]byte("GET / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n"))
		}, "http", ""},
		{"absolute-form", func(c net.Conn) {
			c.Write([]byte("GET http://other.example/ HTTP/1.1\r\nHost: other.example\r\n\r\n"))
		}, "http", "other.example"},
		{"something else", func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH\r\n")) }, "", ""},
		{"nothing (server speaks first)", func(c net.Conn) {}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			go tc.send(a)
			h, err := sniff(b, 200*time.Millisecond, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if h.proto != tc.wantProto || h.name != tc.wantName {
				t.Errorf("sniff = %q %q, want %q %q", h.proto, h.name, tc.wantProto, tc.wantName)
			}
			if tc.wantProto != "" && len(h.prefix) == 0 {
				t.Error("the bytes read are not kept for the destination")
			}
		})
	}
}

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

func TestRing(t *testing.T) {
	r := newRing(3)
	for i := range 5 {
		r.add(&Entry{Port: i})
	}
	got := r.list(0)
	if len(got) != 3 || got[0].Port != 4 || got[2].Port != 2 {
		t.Errorf("list = %+v, want the newest three, newest first", got)
	}
	if got := r.list(1); len(got) != 1 || got[0].Port != 4 {
		t.Errorf("list(1) = %+v", got)
	}
}
