package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// testHost is a name in the certificate of httptest's TLS servers.
	testHost = "example.com"
	// testSecret is the bound credential; no test may see it outside the
	// upstream handler.
	testSecret = "Bearer sk-live-0123456789"
	// fakeSecret is the placeholder the sandbox holds.
	fakeSecret = "Bearer fake"
)

func TestForwarderInjectsSecret(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprintf(w, "hello from upstream at %s", r.URL.Path)
	})
	f := up.forwarder(t, newTestCA(t))
	var up0, down0 atomic.Int64
	f.OnBytes = func(up, down int64) { up0.Store(up); down0.Store(down) }
	sb := startSandbox(t, f)
	c := sb.handshake(t, f.CA)
	if got := c.conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("negotiated protocol = %q, want http/1.1", got)
	}

	req := newRequest(t, "GET", "https://"+testHost+"/v1/models?limit=2")
	req.Header.Set("Authorization", fakeSecret)
	req.Header.Set("X-Kept", "kept")
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	resp, body := c.roundTrip(t, req)
	if resp.StatusCode != http.StatusOK || body != "hello from upstream at /v1/models" || resp.Header.Get("X-Upstream") != "yes" {
		t.Errorf("response = %d %q (X-Upstream %q), want 200 from upstream", resp.StatusCode, body, resp.Header.Get("X-Upstream"))
	}
	assertNoSecret(t, "response", dumpResponse(t, resp)+body)

	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(seen))
	}
	r := seen[0]
	if got := r.header.Values("Authorization"); len(got) != 1 || got[0] != testSecret {
		t.Errorf("upstream Authorization = %q, want only the bound secret", got)
	}
	if got := r.header.Get("X-Kept"); got != "kept" {
		t.Errorf("upstream X-Kept = %q, want kept", got)
	}
	for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "Proxy-Authorization"} {
		if got := r.header.Get(h); got != "" {
			t.Errorf("upstream %s = %q, want none", h, got)
		}
	}
	if r.host != testHost || r.uri != "/v1/models?limit=2" || r.proto != "HTTP/1.1" {
		t.Errorf("upstream saw Host %q, URI %q, %s; want %s, /v1/models?limit=2, HTTP/1.1", r.host, r.uri, r.proto, testHost)
	}

	c.conn.Close()
	if err := sb.wait(t); err != nil {
		t.Errorf("Serve after the sandbox closed = %v, want nil", err)
	}
	if up0.Load() == 0 || down0.Load() == 0 {
		t.Errorf("OnBytes(%d, %d), want both counts positive", up0.Load(), down0.Load())
	}
}

func TestForwarderKeepAlive(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d bytes", len(b))
	})
	f := up.forwarder(t, newTestCA(t))
	sb := startSandbox(t, f)
	c := sb.handshake(t, f.CA)

	for i, method := range []string{"POST", "GET"} {
		req := newRequest(t, method, "https://"+testHost+"/")
		if method == "POST" {
			req.Body = io.NopCloser(strings.NewReader("payload"))
			req.ContentLength = int64(len("payload"))
		}
		req.Header.Set("Authorization", fakeSecret)
		resp, body := c.roundTrip(t, req)
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Errorf("request %d: status %d, close %v; want 200 on a kept-alive connection", i, resp.StatusCode, resp.Close)
		}
		assertNoSecret(t, "response", dumpResponse(t, resp)+body)
	}
	seen := up.requests()
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(seen))
	}
	for i, r := range seen {
		if got := r.header.Get("Authorization"); got != testSecret {
			t.Errorf("request %d: upstream Authorization = %q, want the bound secret", i, got)
		}
	}
	if seen[0].remoteAddr != seen[1].remoteAddr {
		t.Errorf("upstream connections %s and %s, want one reused connection", seen[0].remoteAddr, seen[1].remoteAddr)
	}

	c.conn.Close()
	if err := sb.wait(t); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

func TestForwarderUntrustedUpstream(t *testing.T) {
	t.Parallel()
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(newTestCA(t).CertPEM())
	tests := []struct {
		name      string
		otherRoot bool   // trust an unrelated CA instead of the upstream's
		host      string // the name asked for; the upstream's certificate is for testHost
		wantOK    bool
	}{
		{name: "positive control", host: testHost, wantOK: true},
		{name: "unknown authority", otherRoot: true, host: testHost},
		{name: "system roots", host: testHost}, // RootCAs nil, set below
		{name: "wrong name", host: "api.other.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "reached upstream")
			})
			f := up.forwarder(t, newTestCA(t))
			f.Host = tt.host
			f.Headers[0].Host = tt.host
			if tt.otherRoot {
				f.RootCAs = otherRoots
			}
			if tt.name == "system roots" {
				f.RootCAs = nil
			}
			sb := startSandbox(t, f)
			c := sb.handshakeAs(t, f.CA, tt.host)
			req := newRequest(t, "GET", "https://"+tt.host+"/")
			req.Header.Set("Authorization", fakeSecret)
			resp, body := c.roundTrip(t, req)
			assertNoSecret(t, "response", dumpResponse(t, resp)+body)

			if tt.wantOK {
				if resp.StatusCode != http.StatusOK || body != "reached upstream" {
					t.Errorf("response = %d %q, want 200 from upstream", resp.StatusCode, body)
				}
				c.conn.Close()
				if err := sb.wait(t); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
				return
			}
			want := "berth: upstream certificate for " + tt.host + " is not trusted"
			if resp.StatusCode != http.StatusBadGateway || strings.TrimSpace(body) != want {
				t.Errorf("response = %d %q, want 502 %q", resp.StatusCode, body, want)
			}
			if n := up.calls.Load(); n != 0 {
				t.Errorf("upstream handler called %d times, want 0", n)
			}
			// Serve closes the connection and reports the failure
			// without waiting for the sandbox.
			err := sb.wait(t)
			if !errors.Is(err, ErrUntrustedUpstream) {
				t.Errorf("Serve = %v, want ErrUntrustedUpstream", err)
			}
			if err != nil {
				assertNoSecret(t, "Serve error", err.Error())
			}
		})
	}
}

func TestForwarderUpstreamUnreachable(t *testing.T) {
	t.Parallel()
	f := &Forwarder{
		CA:      newTestCA(t),
		Dial:    func(context.Context) (net.Conn, error) { return nil, errors.New("connection refused by test") },
		Host:    testHost,
		Headers: []Secret{{Host: testHost, Header: "Authorization", Value: testSecret}},
	}
	sb := startSandbox(t, f)
	c := sb.handshake(t, f.CA)
	resp, body := c.roundTrip(t, newRequest(t, "GET", "https://"+testHost+"/"))
	if want := "berth: upstream example.com failed"; resp.StatusCode != http.StatusBadGateway || strings.TrimSpace(body) != want {
		t.Errorf("response = %d %q, want 502 %q", resp.StatusCode, body, want)
	}
	err := sb.wait(t)
	if err == nil || errors.Is(err, ErrUntrustedUpstream) || !strings.Contains(err.Error(), "connection refused by test") {
		t.Errorf("Serve = %v, want the dial error", err)
	}
}

func TestForwarderSandboxMustTrustCA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		trustCA  bool
		wantFail bool
	}{
		{"positive control", true, false},
		{"other CA", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
			f := up.forwarder(t, newTestCA(t))
			ca := f.CA
			if !tt.trustCA {
				ca = newTestCA(t)
			}
			sb := startSandbox(t, f)
			conn := tls.Client(sb.conn, &tls.Config{RootCAs: caPool(ca), ServerName: testHost})
			err := conn.Handshake()
			if tt.wantFail {
				var verr *tls.CertificateVerificationError
				if !errors.As(err, &verr) {
					t.Fatalf("sandbox handshake error = %v, want a certificate verification error", err)
				}
				if err := sb.wait(t); err == nil {
					t.Errorf("Serve after a failed handshake = nil, want error")
				}
			} else if err != nil {
				t.Fatalf("sandbox handshake: %v", err)
			}
			conn.Close()
			sb.wait(t)
			if n := up.calls.Load(); n != 0 {
				t.Errorf("upstream handler called %d times, want 0", n)
			}
		})
	}
}

func TestForwarderRefusesRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		url        string // absolute-form request target when set
		host       string // Host header
		wantStatus int
	}{
		{"positive control", "GET", "", testHost, http.StatusOK},
		{"host with port and case", "GET", "", "Example.COM:443", http.StatusOK},
		{"other host", "GET", "", "attacker.example", http.StatusMisdirectedRequest},
		{"other host with port", "GET", "", "attacker.example:443", http.StatusMisdirectedRequest},
		{"absolute-form positive control", "GET", "https://example.com/", testHost, http.StatusOK},
		{"absolute-form other host", "GET", "https://attacker.example/", testHost, http.StatusMisdirectedRequest},
		{"absolute-form target overrides Host", "GET", "https://example.com/", "attacker.example", http.StatusOK},
		{"trace", "TRACE", "", testHost, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				// A reflecting upstream: it would hand the secret back.
				fmt.Fprintf(w, "%s %s", r.Host, r.Header.Get("Authorization"))
			})
			f := up.forwarder(t, newTestCA(t))
			sb := startSandbox(t, f)
			c := sb.handshake(t, f.CA)
			req := newRequest(t, tt.method, "https://"+testHost+"/")
			req.Host = tt.host
			var resp *http.Response
			var body string
			if tt.url != "" {
				// Written by hand: Request.WriteProxy would put req.Host
				// into the target.
				fmt.Fprintf(c.conn, "%s %s HTTP/1.1\r\nHost: %s\r\n\r\n", tt.method, tt.url, tt.host)
				resp, body = c.readResponse(t, req)
			} else {
				resp, body = c.roundTrip(t, req)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d %q, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if resp.StatusCode != http.StatusOK {
				assertNoSecret(t, "refusal", dumpResponse(t, resp)+body)
			}
			wantCalls := int32(0)
			if tt.wantStatus == http.StatusOK {
				wantCalls = 1
			}
			if n := up.calls.Load(); n != wantCalls {
				t.Errorf("upstream handler called %d times, want %d", n, wantCalls)
			}
			c.conn.Close()
			sb.wait(t)
		})
	}
}

func TestForwarderUpgrade(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(brw, "echo "+line)
			brw.Flush()
		}
	})
	f := up.forwarder(t, newTestCA(t))
	sb := startSandbox(t, f)
	c := sb.handshake(t, f.CA)
	req := newRequest(t, "GET", "https://"+testHost+"/stream")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	req.Header.Set("Authorization", fakeSecret)
	if err := req.Write(c.conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		t.Fatalf("reading upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status = %d, want 101", resp.StatusCode)
	}
	for _, msg := range []string{"one\n", "two\n"} {
		io.WriteString(c.conn, msg)
		got, err := c.br.ReadString('\n')
		if err != nil || got != "echo "+msg {
			t.Errorf("upgraded stream read %q, %v; want %q", got, err, "echo "+msg)
		}
	}
	if got := up.requests()[0].header.Get("Authorization"); got != testSecret {
		t.Errorf("upstream Authorization = %q, want the bound secret", got)
	}
	c.conn.Close()
	if err := sb.wait(t); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

func TestForwarderStops(t *testing.T) {
	t.Parallel()
	t.Run("context", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		f := up.forwarder(t, newTestCA(t))
		ctx, cancel := context.WithCancel(t.Context())
		sb := startSandboxContext(t, ctx, f)
		c := sb.handshake(t, f.CA)
		c.roundTrip(t, newRequest(t, "GET", "https://"+testHost+"/"))
		cancel() // the connection is idle and open
		if err := sb.wait(t); !errors.Is(err, context.Canceled) {
			t.Errorf("Serve after cancel = %v, want context.Canceled", err)
		}
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		f := up.forwarder(t, newTestCA(t))
		f.IdleTimeout = 100 * time.Millisecond
		sb := startSandbox(t, f)
		c := sb.handshake(t, f.CA)
		c.roundTrip(t, newRequest(t, "GET", "https://"+testHost+"/"))
		if err := sb.wait(t); err != nil {
			t.Errorf("Serve after idling = %v, want nil", err)
		}
	})
	t.Run("upgraded stream", func(t *testing.T) {
		t.Parallel()
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			brw.Flush()
			io.Copy(io.Discard, brw)
		})
		f := up.forwarder(t, newTestCA(t))
		ctx, cancel := context.WithCancel(t.Context())
		sb := startSandboxContext(t, ctx, f)
		c := sb.handshake(t, f.CA)
		req := newRequest(t, "GET", "https://"+testHost+"/")
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, _ := c.roundTrip(t, req)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status = %d, want 101", resp.StatusCode)
		}
		cancel()
		if err := sb.wait(t); !errors.Is(err, context.Canceled) {
			t.Errorf("Serve after cancel = %v, want context.Canceled", err)
		}
	})
}

func TestForwarderRejectsBadConfig(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dial := func(context.Context) (net.Conn, error) { return nil, errors.New("not dialed") }
	secret := func(host, header, value string) []Secret {
		return []Secret{{Host: host, Header: header, Value: value}}
	}
	tests := []struct {
		name string
		f    Forwarder
	}{
		{"no CA", Forwarder{Dial: dial, Host: testHost}},
		{"no dial", Forwarder{CA: ca, Host: testHost}},
		{"host with port", Forwarder{CA: ca, Dial: dial, Host: "example.com:443"}},
		{"upper-case host", Forwarder{CA: ca, Dial: dial, Host: "Example.com"}},
		{"secret for another host", Forwarder{CA: ca, Dial: dial, Host: testHost, Headers: secret("other.test", "Authorization", testSecret)}},
		{"framing header", Forwarder{CA: ca, Dial: dial, Host: testHost, Headers: secret(testHost, "Content-Length", testSecret)}},
		{"hop-by-hop header", Forwarder{CA: ca, Dial: dial, Host: testHost, Headers: secret(testHost, "connection", testSecret)}},
		{"bad header name", Forwarder{CA: ca, Dial: dial, Host: testHost, Headers: secret(testHost, "X Key", testSecret)}},
		{"header injection", Forwarder{CA: ca, Dial: dial, Host: testHost, Headers: secret(testHost, "Authorization", testSecret+"\r\nX-Evil: 1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, other := net.Pipe()
			defer other.Close()
			err := tt.f.Serve(t.Context(), conn, nil)
			if err == nil {
				t.Fatalf("Serve = nil, want a configuration error")
			}
			assertNoSecret(t, "Serve error", err.Error())
			if _, err := other.Write([]byte{0}); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("after Serve, writing to the peer = %v, want closed pipe", err)
			}
		})
	}
}

// TestServeLeavesNoGoroutines is not parallel: it counts the process's
// goroutines, so nothing else may start or stop any meanwhile (parallel
// tests are paused while it runs).
func TestServeLeavesNoGoroutines(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			io.WriteString(w, "ok")
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(io.Discard, brw)
	})
	ca := newTestCA(t)
	// Counting while the upstream still runs catches an upstream
	// connection left open: both ends of it have goroutines.
	before := runtime.NumGoroutine()

	// Keep-alive requests, then the sandbox closes.
	f := up.forwarder(t, ca)
	sb := startSandbox(t, f)
	c := sb.handshake(t, ca)
	c.roundTrip(t, newRequest(t, "GET", "https://"+testHost+"/"))
	c.roundTrip(t, newRequest(t, "GET", "https://"+testHost+"/"))
	c.conn.Close()
	sb.wait(t)

	// An upgraded stream the sandbox closes.
	sb = startSandbox(t, f)
	c = sb.handshake(t, ca)
	req := newRequest(t, "GET", "https://"+testHost+"/")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	c.roundTrip(t, req)
	c.conn.Close()
	sb.wait(t)

	// An untrusted upstream.
	f.RootCAs = x509.NewCertPool()
	sb = startSandbox(t, f)
	c = sb.handshake(t, ca)
	c.roundTrip(t, newRequest(t, "GET", "https://"+testHost+"/"))
	sb.wait(t)
	c.conn.Close()

	// Closed connections' goroutines exit soon after, not at once.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after serving, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestPrefixConn(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		io.WriteString(b, " world")
		b.Close()
	}()
	prefix := []byte("hello")
	c := PrefixConn(a, prefix)
	prefix[0] = 'j' // the caller may reuse its buffer
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello world" {
		t.Errorf("ReadAll(PrefixConn) = %q, %v; want %q", got, err, "hello world")
	}
}

// upstream is a real HTTPS server standing in for a website; it records
// the requests it handles.
type upstream struct {
	*httptest.Server
	calls atomic.Int32

	mu   sync.Mutex // guards seen
	seen []seenRequest
}

// seenRequest is what the upstream saw of a request.
type seenRequest struct {
	header     http.Header
	host, uri  string
	proto      string
	remoteAddr string
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{
			header: r.Header.Clone(), host: r.Host, uri: r.RequestURI,
			proto: r.Proto, remoteAddr: r.RemoteAddr,
		})
		u.mu.Unlock()
		h(w, r)
	}))
	// Tests provoke failed handshakes on purpose; keep their log lines out.
	u.Config.ErrorLog = log.New(io.Discard, "", 0)
	u.StartTLS()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// forwarder returns a Forwarder for testHost that dials u, trusts u's
// certificate and binds testSecret as the Authorization header.
func (u *upstream) forwarder(t *testing.T, ca *CA) *Forwarder {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(u.Certificate())
	addr := u.Listener.Addr().String()
	return &Forwarder{
		CA:      ca,
		RootCAs: roots,
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		Host:    testHost,
		Headers: []Secret{{Host: testHost, Header: "Authorization", Value: testSecret}},
	}
}

// sandbox is the sandbox's end of a loopback TCP connection whose other end
// is served by Forwarder.Serve.
type sandbox struct {
	conn net.Conn
	done chan struct{}
	err  error // Serve's result, set before done is closed
}

func startSandbox(t *testing.T, f *Forwarder) *sandbox {
	t.Helper()
	return startSandboxContext(t, t.Context(), f)
}

func startSandboxContext(t *testing.T, ctx context.Context, f *Forwarder) *sandbox {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{done: make(chan struct{})}
	go func() {
		defer close(sb.done)
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			sb.err = err
			return
		}
		// Like the egress proxy, read the start of the ClientHello before
		// handing the connection over.
		prefix := make([]byte, 5)
		if _, err := io.ReadFull(conn, prefix); err != nil {
			conn.Close()
			sb.err = err
			return
		}
		sb.err = f.Serve(ctx, conn, prefix)
	}()
	sb.conn, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sb.conn.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() {
		sb.conn.Close()
		sb.wait(t)
	})
	return sb
}

// wait returns Serve's result, failing the test if Serve does not return.
func (sb *sandbox) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-sb.done:
		return sb.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return")
		return nil
	}
}

// client is the sandbox's TLS connection.
type client struct {
	conn *tls.Conn
	br   *bufio.Reader
}

// handshake completes TLS for testHost, trusting only ca.
func (sb *sandbox) handshake(t *testing.T, ca *CA) *client {
	t.Helper()
	return sb.handshakeAs(t, ca, testHost)
}

func (sb *sandbox) handshakeAs(t *testing.T, ca *CA, host string) *client {
	t.Helper()
	conn := tls.Client(sb.conn, &tls.Config{RootCAs: caPool(ca), ServerName: host, NextProtos: []string{"http/1.1"}})
	if err := conn.Handshake(); err != nil {
		t.Fatalf("sandbox handshake: %v", err)
	}
	return &client{conn: conn, br: bufio.NewReader(conn)}
}

// roundTrip sends req and reads the whole response.
func (c *client) roundTrip(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	if err := req.Write(c.conn); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	return c.readResponse(t, req)
}

func (c *client) readResponse(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, ""
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	return resp, string(body)
}

func newRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func caPool(ca *CA) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	return pool
}

func dumpResponse(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := httputil.DumpResponse(resp, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertNoSecret fails the test if s contains the bound secret.
func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, "sk-live") {
		t.Errorf("%s contains the secret: %q", what, s)
	}
}
