package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// maxSniff bounds what Berth reads of a connection before it decides: a
// TLS ClientHello or an HTTP request's head.
const maxSniff = 16 << 10

// hello is what the first bytes of a connection said.
type hello struct {
	proto  string // "tls", "http" or "" (something else, or nothing yet)
	name   string // the SNI or Host name, lowercase, no port or final dot; "" when none or an IP literal
	prefix []byte // every byte read, to be replayed upstream
}

// sniff reads the start of a connection the sandbox opened, up to
// maxSniff, and finds the name it is for: the TLS SNI or the HTTP Host.
// A client that sends nothing within wait (a protocol whose server speaks
// first) gets hello{} and no error.
func sniff(c net.Conn, wait, total time.Duration) (hello, error) {
	var rec bytes.Buffer
	r := io.TeeReader(io.LimitReader(c, maxSniff), &rec)
	c.SetReadDeadline(time.Now().Add(wait))
	first := make([]byte, 1)
	if _, err := io.ReadFull(r, first); err != nil {
		c.SetReadDeadline(time.Time{})
		if isTimeout(err) {
			return hello{}, nil
		}
		return hello{}, err
	}
	c.SetReadDeadline(time.Now().Add(total))
	defer c.SetReadDeadline(time.Time{})
	rest := io.MultiReader(bytes.NewReader(first), r)
	h := hello{}
	switch {
	case first[0] == 0x16: // TLS handshake record
		h.proto = "tls"
		h.name = clientHelloName(rest)
	case first[0] >= 'A' && first[0] <= 'Z':
		req, err := http.ReadRequest(bufio.NewReaderSize(rest, 4096))
		if err == nil {
			h.proto = "http"
			h.name = hostName(req.Host)
		}
	}
	h.prefix = rec.Bytes()
	return h, nil
}

// errHelloRead stops the TLS handshake once the ClientHello is read.
var errHelloRead = errors.New("client hello read")

// clientHelloName reads a TLS ClientHello from r with crypto/tls's own
// parser and returns its server name.
func clientHelloName(r io.Reader) string {
	var name string
	_ = tls.Server(readOnlyConn{r}, &tls.Config{
		GetConfigForClient: func(ch *tls.ClientHelloInfo) (*tls.Config, error) {
			name = ch.ServerName
			return nil, errHelloRead
		},
	}).Handshake()
	return hostName(name)
}

// hostName is the name of an SNI or Host value: lowercase, without port
// or final dot; "" for an IP literal.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if len(host) > 253 {
		return ""
	}
	return host
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readOnlyConn is a net.Conn that reads from r and refuses writes, so that
// crypto/tls can parse a ClientHello without answering it.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
