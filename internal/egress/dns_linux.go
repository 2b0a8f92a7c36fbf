package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// How long the names Berth's resolver answered stay bound to their
// addresses (for decisions on connections to them), the TTL the sandbox
// is told, and how many bindings a sandbox keeps.
const (
	bindingLife   = 10 * time.Minute
	answerTTL     = 30 // seconds
	maxBindings   = 4096
	maxAnswers    = 16
	lookupTimeout = 5 * time.Second
)

// names binds addresses to the names Berth's resolver answered them for,
// so that a connection to an address is decided with its names even when
// its first bytes carry none.
type names struct {
	mu   sync.Mutex                          // guards byIP
	byIP map[netip.Addr]map[string]time.Time // address -> name -> expiry
}

func newNames() *names { return &names{byIP: map[netip.Addr]map[string]time.Time{}} }

func (n *names) bind(name string, ips []netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if len(n.byIP) >= maxBindings {
		for ip, m := range n.byIP {
			for nm, exp := range m {
				if now.After(exp) {
					delete(m, nm)
				}
			}
			if len(m) == 0 {
				delete(n.byIP, ip)
			}
		}
		if len(n.byIP) >= maxBindings {
			return
		}
	}
	for _, ip := range ips {
		m := n.byIP[ip]
		if m == nil {
			m = map[string]time.Time{}
			n.byIP[ip] = m
		}
		m[name] = now.Add(bindingLife)
	}
}

// of returns the live names bound to ip.
func (n *names) of(ip netip.Addr) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	now := time.Now()
	for nm, exp := range n.byIP[ip] {
		if now.Before(exp) {
			out = append(out, nm)
		}
	}
	return out
}

// bound reports whether name was answered with ip.
func (n *names) bound(name string, ip netip.Addr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	exp, ok := n.byIP[ip][name]
	return ok && time.Now().Before(exp)
}

// serveDNS answers the sandbox's queries on conn until it is closed. Only
// A queries are answered with addresses: with the addresses the policy
// would let the sandbox reach (a name that resolves to a blocked address
// never gets that address). AAAA and every other type get an empty
// answer (the sandbox has no IPv6). A name the policy denies is refused
// without being looked up, so the sandbox cannot use Berth's resolver to
// send it anywhere (NET-15).
func (l *link) serveDNS(conn net.PacketConn) {
	sem := make(chan struct{}, 32)
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		q := append([]byte(nil), buf[:n]...)
		select {
		case sem <- struct{}{}:
		default:
			l.svc.metrics.dns.WithLabelValues("dropped").Inc()
			continue // too many queries at once: the client retries
		}
		l.wg.Add(1) // the link's close waits for it (a lookup is bounded)
		go func() {
			defer l.wg.Done()
			defer func() { <-sem }()
			if resp := l.answer(q); resp != nil {
				_, _ = conn.WriteTo(resp, from)
			}
		}()
	}
}

// answer builds the response to one query message, or nil to drop it.
func (l *link) answer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return reply(h, qs, dnsmessage.RCodeFormatError, nil)
	}
	question := qs[0]
	name := strings.TrimSuffix(strings.ToLower(question.Name.String()), ".")
	if question.Class != dnsmessage.ClassINET {
		return reply(h, qs, dnsmessage.RCodeNotImplemented, nil)
	}
	if why := l.nameRefused(name); why != "" {
		l.svc.metrics.dns.WithLabelValues("refused").Inc()
		l.log.add(&Entry{Time: time.Now().UTC(), Domain: name, Proto: "dns", Decision: "deny", Reason: why,
			Detail: "name refused by the policy; not looked up"})
		return reply(h, qs, dnsmessage.RCodeRefused, nil)
	}
	if question.Type != dnsmessage.TypeA {
		l.svc.metrics.dns.WithLabelValues("empty").Inc()
		return reply(h, qs, dnsmessage.RCodeSuccess, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	ips, err := l.svc.lookup(ctx, name)
	if err != nil {
		if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			l.svc.metrics.dns.WithLabelValues("nxdomain").Inc()
			return reply(h, qs, dnsmessage.RCodeNameError, nil)
		}
		l.svc.metrics.dns.WithLabelValues("servfail").Inc()
		return reply(h, qs, dnsmessage.RCodeServerFailure, nil)
	}
	var ok []netip.Addr
	for _, ip := range ips {
		if !ip.Is4() || len(ok) == maxAnswers {
			continue
		}
		if d := l.decideAddr(name, ip); d != "" {
			l.log.add(&Entry{Time: time.Now().UTC(), Domain: name, IP: ip.String(), Proto: "dns", Decision: "deny",
				Reason: d, Detail: "address left out of the answer"})
			continue
		}
		ok = append(ok, ip)
	}
	l.names.bind(name, ok)
	l.svc.metrics.dns.WithLabelValues("answered").Inc()
	return reply(h, qs, dnsmessage.RCodeSuccess, ok)
}

// reply builds a response to h with answers for its one question.
func reply(h dnsmessage.Header, qs []dnsmessage.Question, rcode dnsmessage.RCode, ips []netip.Addr) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Authoritative: false, RCode: rcode,
	})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	for _, q := range qs {
		if err := b.Question(q); err != nil {
			return nil
		}
	}
	if err := b.StartAnswers(); err != nil {
		return nil
	}
	for _, ip := range ips {
		if err := b.AResource(dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: answerTTL},
			dnsmessage.AResource{A: ip.As4()}); err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
