package egress

import (
	"sync"

	"github.com/berthdev/berth/internal/apitype"

	"github.com/prometheus/client_golang/prometheus"
)

// Entry is one connection in a sandbox's network log.
type Entry = apitype.NetworkLogEntry

// Reasons a connection or name is refused, as the log and metrics say them.
const (
	ReasonDestinationBlocked = "destination_blocked" // special-purpose range, the host's or another sandbox's address
	ReasonPortBlocked        = "port_blocked"
	ReasonDenied             = "denied_by_rule"
	ReasonNotAllowed         = "not_allowed"      // an allowlist is set and nothing in it matched
	ReasonNameMismatch       = "name_mismatch"    // SNI or Host names a host whose addresses do not include the dialed one
	ReasonConnectionLimit    = "connection_limit" // too many open connections
	ReasonDialFailed         = "dial_failed"
	ReasonPolicyChanged      = "policy_changed" // closed by a live policy change
)

// ring is a bounded log, oldest first.
type ring struct {
	mu      sync.Mutex // guards all below
	entries []*Entry
	next    int
	full    bool
}

func newRing(n int) *ring { return &ring{entries: make([]*Entry, n)} }

func (r *ring) add(e *Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[r.next] = e
	r.next = (r.next + 1) % len(r.entries)
	if r.next == 0 {
		r.full = true
	}
}

// update changes an entry in place, under the ring's lock.
func (r *ring) update(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

// list returns copies of the newest limit entries (all with limit <= 0),
// newest first.
func (r *ring) list(limit int) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.entries)
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Entry, 0, limit)
	for i := 1; i <= limit; i++ {
		e := r.entries[(r.next-i+len(r.entries))%len(r.entries)]
		out = append(out, *e)
	}
	return out
}

// metrics are the egress's Prometheus series.
type metrics struct {
	conns *prometheus.CounterVec
	bytes *prometheus.CounterVec
	dns   *prometheus.CounterVec
	open  prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_egress_connections_total", Help: "Connections sandboxes opened through egress, by decision and reason.",
		}, []string{"decision", "reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_egress_bytes_total", Help: "Bytes carried for sandboxes, by direction (up: sandbox to destination).",
		}, []string{"direction"}),
		dns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_egress_dns_queries_total", Help: "DNS queries sandboxes asked Berth, by result.",
		}, []string{"result"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_egress_connections_open", Help: "Connections open through egress now.",
		}),
	}
}

// Collectors returns the egress's metrics (none from a nil Service).
func (s *Service) Collectors() []prometheus.Collector {
	if s == nil {
		return nil // no egress on this daemon
	}
	return []prometheus.Collector{s.metrics.conns, s.metrics.bytes, s.metrics.dns, s.metrics.open}
}
