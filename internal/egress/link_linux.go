package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/berthdev/berth/internal/broker"
	"github.com/berthdev/berth/internal/netpolicy"
)

// New makes the egress service.
func New(cfg Config, keys KeyStore, sealer *broker.Sealer) (*Service, error) {
	cfg.defaults()
	d, err := newDialer(cfg.DialNetNS)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, logger: cfg.Logger, store: keys, sealer: sealer, metrics: newMetrics(), dialer: d, res: net.DefaultResolver,
		conns: make(chan struct{}, cfg.MaxConns), links: map[string]*link{}}
	if cfg.DNSServer != "" {
		s.res = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, cfg.DNSServer)
		}}
	}
	return s, nil
}

// Close ends every sandbox's egress the Service serves, leaving their
// namespaces (a restarted daemon serves them again).
func (s *Service) Close() {
	s.mu.Lock()
	links := s.links
	s.links = map[string]*link{}
	s.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	s.dialer.Close()
}

// pinName is the file in a sandbox's directory its namespace is pinned on.
const pinName = "netns"

// serve serves sandbox sb's egress: it makes the sandbox's network namespace
// (or, when the sandbox is still running from before a daemon restart,
// serves the one it has) and returns its path, for the runtime to run the
// sandbox in. Calling it for a sandbox already served updates its policy
// and secrets.
func (s *Service) serve(ctx context.Context, sb Sandbox) (string, error) {
	if sb.Policy.Mode != netpolicy.ModeEgress {
		return "", fmt.Errorf("sandbox %s does not have egress", sb.ID)
	}
	pin := filepath.Join(sb.Dir, pinName)
	s.mu.Lock()
	l, ok := s.links[sb.ID]
	s.mu.Unlock()
	if ok {
		l.set(sb.Policy, sb.Secrets, sb.CA)
		return pin, nil
	}
	var tap *os.File
	var err error
	if isNetNS(pin) {
		tap, err = adoptNetNS(pin)
	} else {
		_ = removeNetNS(pin)
		tap, err = makeNetNS(pin)
	}
	if err != nil {
		return "", err
	}
	l = &link{svc: s, id: sb.ID, pin: pin, tap: tap, names: newNames(), log: newRing(s.cfg.LogSize),
		slots: make(chan struct{}, s.cfg.MaxConnsPerSandbox), active: map[*flow]struct{}{}}
	l.set(sb.Policy, sb.Secrets, sb.CA)
	st, dns, err := newStack(tap, l.onTCP)
	if err != nil {
		tap.Close()
		_ = removeNetNS(pin)
		return "", err
	}
	l.stack, l.dns = st, dns
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.serveDNS(dns)
	}()
	s.mu.Lock()
	s.links[sb.ID] = l
	s.mu.Unlock()
	return pin, nil
}

// down stops serving sandbox id's egress and removes its namespace (it
// goes with the last of the sandbox's processes). It is idempotent.
func (s *Service) down(id, dir string) error {
	s.mu.Lock()
	l := s.links[id]
	delete(s.links, id)
	s.mu.Unlock()
	if l != nil {
		l.close()
	}
	return removeNetNS(filepath.Join(dir, pinName))
}

// setPolicy changes a served sandbox's policy: new connections obey at
// once, and open connections the new policy refuses are closed. A sandbox
// not served now (paused on disk, hibernated) takes it at its next Up.
func (s *Service) setPolicy(id string, p netpolicy.Policy) {
	s.mu.Lock()
	l := s.links[id]
	s.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	l.policy = p
	l.mu.Unlock()
	l.recheck()
}

// setSecrets changes a served sandbox's secrets; connections opened from
// now on use them.
func (s *Service) setSecrets(id string, secrets []broker.Secret, ca *broker.CA) {
	s.mu.Lock()
	l := s.links[id]
	s.mu.Unlock()
	if l == nil {
		return
	}
	by := byHost(secrets)
	l.mu.Lock()
	l.secrets, l.ca = by, ca
	l.mu.Unlock()
}

// log returns the newest limit entries of sandbox id's connection log,
// newest first; nil when its egress is not served.
func (s *Service) log(id string, limit int) ([]Entry, bool) {
	s.mu.Lock()
	l := s.links[id]
	s.mu.Unlock()
	if l == nil {
		return nil, false
	}
	return l.log.list(limit), true
}

// isNetNS reports whether path is a pinned network namespace.
func isNetNS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// link is one sandbox's egress: its device, stack, resolver and the
// connections open through it.
type link struct {
	svc   *Service
	id    string
	pin   string
	tap   *os.File
	stack *stack.Stack
	dns   *gonet.UDPConn
	names *names
	log   *ring
	slots chan struct{} // the sandbox's connection slots
	wg    sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	policy  netpolicy.Policy
	secrets map[string][]broker.Secret // by host
	ca      *broker.CA
	active  map[*flow]struct{}
	closed  bool
}

// flow is one open connection, as a live policy change rechecks it.
type flow struct {
	names []string
	ip    netip.Addr
	port  int
	entry *Entry
	stop  func()
}

func (l *link) set(p netpolicy.Policy, secrets []broker.Secret, ca *broker.CA) {
	by := byHost(secrets)
	l.mu.Lock()
	l.policy, l.secrets, l.ca = p, by, ca
	l.mu.Unlock()
}

// byHost groups secrets by their host.
func byHost(secrets []broker.Secret) map[string][]broker.Secret {
	by := map[string][]broker.Secret{}
	for _, s := range secrets {
		by[s.Host] = append(by[s.Host], s)
	}
	return by
}

func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	flows := make([]*flow, 0, len(l.active))
	for f := range l.active {
		flows = append(flows, f)
	}
	l.mu.Unlock()
	for _, f := range flows {
		f.stop()
	}
	l.dns.Close()
	l.stack.Close()
	l.wg.Wait()
	l.stack.Wait()
	l.tap.Close()
}

// recheck closes the open connections the current policy refuses.
func (l *link) recheck() {
	l.mu.Lock()
	p := l.policy
	flows := make([]*flow, 0, len(l.active))
	for f := range l.active {
		flows = append(flows, f)
	}
	l.mu.Unlock()
	lim := l.svc.limits()
	for _, f := range flows {
		if d := netpolicy.Decide(p, lim, f.names, f.ip, f.port); !d.Allowed {
			l.log.update(func() { f.entry.Reason, f.entry.Detail = ReasonPolicyChanged, d.Detail })
			f.stop()
		}
	}
}

// nameRefused returns why the policy refuses every destination named name,
// or "".
func (l *link) nameRefused(name string) string {
	l.mu.Lock()
	p := l.policy
	l.mu.Unlock()
	d := netpolicy.DecideName(p, l.svc.limits(), name)
	if d.Allowed {
		return ""
	}
	return reasonOf(d)
}

// decideAddr returns why ip may never be reached under name (whatever the
// port), or "".
func (l *link) decideAddr(name string, ip netip.Addr) string {
	l.mu.Lock()
	p := l.policy
	l.mu.Unlock()
	d := netpolicy.Decide(p, l.svc.limits(), []string{name}, ip, 0)
	switch d.Reason {
	case netpolicy.ReasonSpecialPurpose, netpolicy.ReasonHostAddress, netpolicy.ReasonDeniedByRule:
		return reasonOf(d)
	}
	return ""
}

// reasonOf is the log's reason for a refusal.
func reasonOf(d netpolicy.Decision) string {
	switch d.Reason {
	case netpolicy.ReasonSpecialPurpose, netpolicy.ReasonHostAddress:
		return ReasonDestinationBlocked
	case netpolicy.ReasonPortBlocked:
		return ReasonPortBlocked
	case netpolicy.ReasonDeniedByRule:
		return ReasonDenied
	default:
		return ReasonNotAllowed
	}
}

// onTCP takes every connection the sandbox opens: it completes the
// handshake (so that Berth can read which host the client wants) and
// hands it to serve.
func (l *link) onTCP(r *tcp.ForwarderRequest) {
	id := r.ID()
	ip := netip.AddrFrom4(id.LocalAddress.As4())
	port := int(id.LocalPort)
	if !l.acquire() {
		r.Complete(true)
		l.record(&Entry{Time: time.Now().UTC(), IP: ip.String(), Port: port, Decision: "deny", Reason: ReasonConnectionLimit,
			Detail: "too many open connections"})
		return
	}
	var wq waiter.Queue
	ep, err := r.CreateEndpoint(&wq)
	if err != nil {
		r.Complete(true)
		l.release()
		return
	}
	r.Complete(false)
	ep.SocketOptions().SetDelayOption(false) // no Nagle: Berth relays what it reads at once
	c := gonet.NewTCPConn(&wq, ep)
	// A handshake that ends as the link closes is not served: close has
	// begun waiting for the link's goroutines, and no more may join.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ep.Abort()
		c.Close()
		l.release()
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		defer l.release()
		l.serve(c, ep.Abort, ip, port)
	}()
}

func (l *link) acquire() bool {
	select {
	case l.slots <- struct{}{}:
	default:
		return false
	}
	select {
	case l.svc.conns <- struct{}{}:
		l.svc.metrics.open.Inc()
		return true
	default:
		<-l.slots
		return false
	}
}

func (l *link) release() {
	<-l.svc.conns
	<-l.slots
	l.svc.metrics.open.Dec()
}

func (l *link) record(e *Entry) {
	l.log.add(e)
	l.svc.metrics.conns.WithLabelValues(e.Decision, e.Reason).Inc()
}

// How long Berth waits for a client's first bytes: on the web's ports the
// client speaks first; elsewhere (ssh, smtp) the server may, so the wait is
// short and the connection is decided on its address and DNS names.
const (
	helloWaitWeb   = 10 * time.Second
	helloWaitOther = 300 * time.Millisecond
	helloRead      = 10 * time.Second
	dialTimeout    = 10 * time.Second
)

// serve decides one connection and, when allowed, carries it to its
// destination: the address the sandbox dialed, never another.
func (l *link) serve(c *gonet.TCPConn, abort func(), ip netip.Addr, port int) {
	defer c.Close()
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	dial := func(ctx context.Context) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		return l.svc.dialer.DialContext(ctx, "tcp", addr)
	}
	// When the address and port alone are allowed and no allowlist could
	// refuse them by name, Berth dials while the client's first bytes
	// arrive: only a deny rule matching the name they carry could still
	// refuse the connection, and then the dialed one is closed unused (a
	// handshake, no data, with an address the policy allows).
	lim := l.svc.limits() // one copy for this connection's decisions
	early := l.dialEarly(lim, ip, port, dial)
	defer early.discard()
	wait := helloWaitOther
	if port == 80 || port == 443 {
		wait = helloWaitWeb
	}
	h, err := sniff(c, wait, helloRead)
	if err != nil {
		abort()
		return
	}
	e := &Entry{Time: time.Now().UTC(), Domain: h.name, IP: ip.String(), Port: port, Proto: h.proto}
	d, names := l.decide(lim, h.name, ip, port)
	if e.Domain == "" && len(names) > 0 {
		e.Domain = names[0]
	}
	if !d.Allowed {
		e.Decision, e.Reason, e.Detail = "deny", d.Reason, d.Detail
		l.record(e)
		if h.proto == "http" {
			msg := fmt.Sprintf("berth: %s: the connection to %s was refused (%s)\n", e.Reason, net.JoinHostPort(e.IP, strconv.Itoa(port)), e.Detail)
			_, _ = fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Berth-Reason: %s\r\n\r\n%s",
				len(msg), e.Reason, msg)
			return
		}
		abort()
		return
	}
	e.Decision = "allow"
	l.mu.Lock()
	secrets, ca := l.secrets[h.name], l.ca
	ctx, cancel := context.WithTimeout(context.Background(), l.svc.cfg.MaxLifetime)
	defer cancel()
	f := &flow{names: names, ip: ip, port: port, entry: e, stop: func() { cancel(); abort(); c.Close() }}
	if l.closed {
		l.mu.Unlock()
		abort()
		return
	}
	l.active[f] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.active, f)
		l.mu.Unlock()
		l.log.update(func() { e.Open = false })
	}()
	e.Open = true
	l.record(e)
	if early != nil {
		fresh := dial
		dial = func(ctx context.Context) (net.Conn, error) {
			if c, err, ok := early.take(ctx); ok {
				return c, err
			}
			return fresh(ctx) // a later connection to the same destination
		}
	}
	count := func(up, down int64) {
		l.log.update(func() { e.BytesUp += up; e.BytesDown += down })
		l.svc.metrics.bytes.WithLabelValues("up").Add(float64(up))
		l.svc.metrics.bytes.WithLabelValues("down").Add(float64(down))
	}
	if len(secrets) > 0 && h.proto == "tls" && ca != nil {
		e.Secret = true
		fw := &broker.Forwarder{CA: ca, RootCAs: l.svc.cfg.RootCAs, Dial: dial, Host: h.name, Headers: secrets,
			IdleTimeout: l.svc.cfg.IdleTimeout, OnBytes: count}
		if err := fw.Serve(ctx, c, h.prefix); err != nil && !errors.Is(err, context.Canceled) {
			l.log.update(func() { e.Detail = err.Error() })
		}
		return
	}
	up, err := dial(ctx)
	if err != nil {
		l.log.update(func() { e.Decision, e.Reason, e.Detail = "deny", ReasonDialFailed, err.Error() })
		abort()
		return
	}
	defer up.Close()
	if _, err := up.Write(h.prefix); err != nil {
		abort()
		return
	}
	count(int64(len(h.prefix)), 0)
	pipe(ctx, c, up, l.svc.cfg.IdleTimeout, count)
}

// earlyDial is a dial started before the decision.
type earlyDial struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when c and err are set
	c      net.Conn
	err    error

	mu    sync.Mutex // guards taken
	taken bool
}

// dialEarly starts dialing ip:port when the policy allows it on its
// address alone and has no allowlist; otherwise it returns nil.
func (l *link) dialEarly(lim netpolicy.Limits, ip netip.Addr, port int, dial func(context.Context) (net.Conn, error)) *earlyDial {
	l.mu.Lock()
	p := l.policy
	l.mu.Unlock()
	if len(p.AllowOnly) > 0 || len(lim.AllowOnly) > 0 || !netpolicy.Decide(p, lim, l.names.of(ip), ip, port).Allowed {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &earlyDial{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.c, e.err = dial(ctx)
	}()
	return e
}

// take waits for the early dial and hands its connection over; ok is
// false once it has been taken.
func (e *earlyDial) take(ctx context.Context) (c net.Conn, err error, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.taken {
		return nil, nil, false
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		e.cancel()
		<-e.done
	}
	e.taken = true
	return e.c, e.err, true
}

// discard ends an early dial whose connection was not taken.
func (e *earlyDial) discard() {
	if e == nil {
		return
	}
	e.cancel()
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.taken && e.c != nil {
		e.c.Close()
	}
	e.taken = true
}

// decide decides a connection to ip:port whose first bytes named name.
// Every name known for it counts for a refusal; for an allowance only the
// names bound to ip count: those Berth's resolver answered with ip, or a
// SNI or Host name that resolves to ip now. A client cannot reach an
// address by naming an allowed host it does not belong to.
func (l *link) decide(lim netpolicy.Limits, name string, ip netip.Addr, port int) (netpolicy.Decision, []string) {
	l.mu.Lock()
	p := l.policy
	l.mu.Unlock()
	bound := l.names.of(ip)
	all := bound
	if name != "" && !slices.Contains(all, name) {
		all = append(slices.Clone(all), name)
	}
	slices.Sort(all)
	d := netpolicy.Decide(p, lim, all, ip, port)
	if !d.Allowed {
		d.Reason = reasonOf(d)
		return d, all
	}
	if netpolicy.Decide(p, lim, bound, ip, port).Allowed {
		return d, all
	}
	if name != "" && !slices.Contains(bound, name) {
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		ips, err := l.svc.lookup(ctx, name)
		cancel()
		if err == nil && slices.Contains(ips, ip) {
			return d, all
		}
	}
	return netpolicy.Decision{Reason: ReasonNameMismatch,
		Detail: fmt.Sprintf("%s is allowed only by name, and %q does not resolve to it", ip, name)}, all
}

// pipe copies both ways between the sandbox's connection and the
// destination's until both are done, nothing crosses for idle, or ctx
// ends; count gets the bytes each way.
func pipe(ctx context.Context, down, up net.Conn, idle time.Duration, count func(up, down int64)) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { down.Close(); up.Close() })
	defer stop()
	go func() {
		t := time.NewTicker(min(idle/4, 15*time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if time.Since(time.Unix(0, last.Load())) > idle {
					cancel()
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := copyActive(up, down, &last)
		count(n, 0)
		closeWrite(up)
	}()
	n := copyActive(down, up, &last)
	count(0, n)
	closeWrite(down)
	wg.Wait()
}

// copyActive copies src to dst, noting the time of every read in last.
// Its buffer starts small and doubles, up to 256 KiB, while reads fill it:
// an idle connection holds little, a bulk transfer crosses in few calls.
func copyActive(dst io.Writer, src io.Reader, last *atomic.Int64) int64 {
	buf := make([]byte, 16<<10)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n
			}
			n += int64(k)
			if k == len(buf) && len(buf) < 256<<10 {
				buf = make([]byte, 2*len(buf))
			}
		}
		if err != nil {
			return n
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
