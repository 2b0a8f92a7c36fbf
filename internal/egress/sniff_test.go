package egress

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
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
