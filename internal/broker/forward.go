package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is the Forwarder's IdleTimeout when it is zero.
const DefaultIdleTimeout = 60 * time.Second

// ErrUntrustedUpstream is matched by the error Serve returns when the
// upstream server's certificate does not verify for the host.
var ErrUntrustedUpstream = errors.New("upstream certificate is not trusted")

// Forwarder serves one sandbox connection to one host that has bound
// secrets: it terminates the sandbox's TLS with a certificate from the
// sandbox's CA, sets the secret headers on each request and forwards it over
// verified TLS to the real server.
//
// A Forwarder is configured once and not modified afterwards; Serve may then
// be called for several connections at once, each getting its own upstream
// connection.
type Forwarder struct {
	// CA is the sandbox's CA, which signs the certificate shown to it.
	CA *CA
	// RootCAs are the roots trusted for the upstream server; nil means the
	// system roots.
	RootCAs *x509.CertPool
	// Dial connects to the upstream TCP address the caller's egress policy
	// chose. The Forwarder never resolves names itself.
	Dial func(ctx context.Context) (net.Conn, error)
	// Host is the TLS server name the sandbox asked for (its SNI), a
	// lowercase DNS name. It is the name shown to the sandbox, verified on
	// the upstream certificate and sent as the Host header.
	Host string
	// Headers are set on every request, replacing any value the sandbox
	// sent. Each one's Host must equal Host.
	Headers []Secret
	// IdleTimeout bounds the wait for the sandbox's next request, for each
	// TLS handshake and for the upstream dial, and how long an idle upstream
	// connection is kept. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// OnBytes, if set, is called once when Serve ends with the number of
	// bytes read from the sandbox's connection (up, including prefix) and
	// written to it (down), TLS framing included.
	OnBytes func(up, down int64)
}

// Serve terminates TLS on conn, the sandbox's side of the connection, and
// serves HTTP/1.1 requests on it until the sandbox closes it, ctx ends or
// forwarding fails. prefix holds the first bytes of conn that the caller
// already read to find the server name; they are read again before conn.
// Serve closes conn before it returns, and the goroutines it started end
// with it.
//
// Every request goes to the upstream server over TLS (server name Host,
// roots RootCAs, TLS 1.2 or later, HTTP/1.1), with hop-by-hop headers
// removed, no X-Forwarded-* headers added, each Headers entry set, and the
// Host header forced to Host (a request naming another host is answered
// 421). CONNECT and TRACE are answered 405: TRACE would make the server
// reflect the injected secret back. Responses, including trailers and
// streamed bodies, are passed through. A protocol upgrade such as WebSocket
// is forwarded: after the upstream's 101 response, bytes are copied both
// ways until either side closes or ctx ends.
//
// Serve returns nil when the sandbox closed the connection and ctx.Err() if
// ctx ended first. If a request cannot be forwarded, the sandbox gets a 502
// response and the connection is closed, and Serve returns the cause; an
// upstream certificate that does not verify is answered "berth: upstream
// certificate for HOST is not trusted" and the error matches
// ErrUntrustedUpstream. Neither responses made by Serve nor its errors ever
// contain a secret value.
func (f *Forwarder) Serve(ctx context.Context, conn net.Conn, prefix []byte) error {
	defer conn.Close()
	if err := f.check(); err != nil {
		return err
	}
	leaf, err := f.CA.Leaf(f.Host)
	if err != nil {
		return err
	}
	counted := &countingConn{Conn: PrefixConn(conn, prefix)}
	if f.OnBytes != nil {
		defer func() { f.OnBytes(counted.read.Load(), counted.written.Load()) }()
	}
	// Closing conn unblocks whatever is reading or writing it: the
	// handshake, the HTTP server, an upgraded stream.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	idle := f.idleTimeout()

	tconn := tls.Server(counted, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	if err := conn.SetDeadline(time.Now().Add(idle)); err != nil {
		return fmt.Errorf("setting handshake deadline: %w", err)
	}
	if err := tconn.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("tls handshake with sandbox for %s: %w", f.Host, err)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clearing handshake deadline: %w", err)
	}

	var http1 http.Protocols
	http1.SetHTTP1(true)
	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialTLSContext:        f.dialUpstream,
		ForceAttemptHTTP2:     false,
		Protocols:             &http1,
		MaxIdleConns:          1,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       idle,
		DisableCompression:    true, // pass Accept-Encoding and bodies through as they are
		ResponseHeaderTimeout: 0,    // upstreams may think for long, e.g. model APIs
	}
	defer transport.CloseIdleConnections()

	var failure upstreamFailure
	discard := log.New(io.Discard, "", 0)
	proxy := &httputil.ReverseProxy{
		Rewrite:   f.rewrite,
		Transport: transport,
		ErrorLog:  discard,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the sandbox went away or ctx ended: nobody to answer
			}
			failure.set(err)
			// This connection's upstream is broken; the sandbox may open a
			// new connection to try again.
			w.Header().Set("Connection", "close")
			msg := fmt.Sprintf("berth: upstream %s failed", f.Host)
			if errors.Is(err, ErrUntrustedUpstream) {
				msg = fmt.Sprintf("berth: upstream certificate for %s is not trusted", f.Host)
			}
			http.Error(w, msg, http.StatusBadGateway)
		},
	}

	ln := &oneConnListener{conn: tconn, closed: make(chan struct{})}
	// handlers tracks running handlers: a hijacked (upgraded) connection
	// outlives the server's own tracking.
	var handlers sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			f.serveHTTP(w, r, proxy)
		}),
		Protocols:         &http1,
		ReadHeaderTimeout: idle,
		IdleTimeout:       idle,
		ErrorLog:          discard,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateClosed || state == http.StateHijacked {
				ln.Close()
			}
		},
	}
	// Serve returns once ln is closed, which happens when the connection is
	// closed or hijacked; a hijacking handler is still running then.
	if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		conn.Close()
		handlers.Wait()
		return fmt.Errorf("serving sandbox connection for %s: %w", f.Host, err)
	}
	handlers.Wait()

	if err := failure.get(); err != nil {
		return fmt.Errorf("forwarding to %s: %w", f.Host, err)
	}
	return ctx.Err()
}

// serveHTTP answers one request from the sandbox.
func (f *Forwarder) serveHTTP(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
	if r.Method == http.MethodConnect || r.Method == http.MethodTrace {
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
		http.Error(w, "berth: method "+r.Method+" is not forwarded", http.StatusMethodNotAllowed)
		return
	}
	// Without this check a sandbox could send the secret to another site
	// served by the same front end (domain fronting).
	if host := hostname(r.Host); host != "" && host != f.Host {
		http.Error(w, fmt.Sprintf("berth: request for host %q on a connection to %s", host, f.Host), http.StatusMisdirectedRequest)
		return
	}
	proxy.ServeHTTP(w, r)
}

// rewrite makes the upstream request: ReverseProxy has already removed the
// hop-by-hop and X-Forwarded-* headers.
func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	host := pr.In.Host // keeps a port the sandbox named; serveHTTP checked the name
	if host == "" {
		host = f.Host
	}
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = host
	pr.Out.URL.User = nil // else the transport would add Basic credentials from it
	pr.Out.Host = host
	for _, s := range f.Headers {
		pr.Out.Header.Set(s.Header, s.Value)
	}
}

// dialUpstream connects to the upstream server over verified TLS.
func (f *Forwarder) dialUpstream(ctx context.Context, _, _ string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, f.idleTimeout())
	defer cancel()
	raw, err := f.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dialing upstream %s: %w", f.Host, err)
	}
	tconn := tls.Client(raw, &tls.Config{
		ServerName: f.Host,
		RootCAs:    f.RootCAs,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	})
	if err := tconn.HandshakeContext(ctx); err != nil {
		raw.Close()
		var verr *tls.CertificateVerificationError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("tls handshake with upstream %s: %w: %w", f.Host, ErrUntrustedUpstream, err)
		}
		return nil, fmt.Errorf("tls handshake with upstream %s: %w", f.Host, err)
	}
	return tconn, nil
}

// check reports a Forwarder that is not fit to serve. Its errors name
// secrets by host and header, never by value.
func (f *Forwarder) check() error {
	switch {
	case f.CA == nil:
		return errors.New("forwarder has no CA")
	case f.Dial == nil:
		return errors.New("forwarder has no Dial")
	case !validHost(f.Host):
		return fmt.Errorf("forwarder host %q is not a lowercase DNS name", f.Host)
	}
	for i, s := range f.Headers {
		if s.Host != f.Host {
			return fmt.Errorf("secret %d is bound to %q, not to forwarder host %s", i, s.Host, f.Host)
		}
		if field, why := s.Problem(); field != "" {
			return fmt.Errorf("secret %d for %s: %s %s", i, f.Host, field, why)
		}
	}
	return nil
}

func (f *Forwarder) idleTimeout() time.Duration {
	if f.IdleTimeout > 0 {
		return f.IdleTimeout
	}
	return DefaultIdleTimeout
}

// reservedHeaders are headers that frame the message or the connection, so
// a secret set in them would be dropped or would break the request.
var reservedHeaders = map[string]bool{
	"Connection":          true,
	"Content-Length":      true,
	"Host":                true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// validHeaderName reports whether name is an HTTP token (RFC 9110, 5.1).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v can be sent as a header value: no
// control characters other than tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// hostname returns the host of a Host header value, lowercased and without
// a port or trailing dot.
func hostname(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// upstreamFailure holds the first error forwarding met.
type upstreamFailure struct {
	mu  sync.Mutex // guards err
	err error
}

func (u *upstreamFailure) set(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		u.err = err
	}
}

func (u *upstreamFailure) get() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// PrefixConn returns a net.Conn whose Read returns prefix before reading
// from c: it puts back bytes already read from c, such as a TLS ClientHello
// inspected for its server name. prefix is copied. The other methods are
// c's.
func PrefixConn(c net.Conn, prefix []byte) net.Conn {
	if len(prefix) == 0 {
		return c
	}
	return &prefixConn{Conn: c, prefix: append([]byte(nil), prefix...)}
}

type prefixConn struct {
	net.Conn
	// mu guards prefix, as net.Conn methods may be called concurrently.
	mu     sync.Mutex
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// countingConn counts the bytes read from and written to a net.Conn.
type countingConn struct {
	net.Conn
	read, written atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// oneConnListener is a net.Listener that accepts conn once and then blocks
// until it is closed, so that http.Server serves exactly one connection.
type oneConnListener struct {
	conn      net.Conn
	accepted  atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if l.accepted.CompareAndSwap(false, true) {
		return l.conn, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
