package egress

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/broker"
	"github.com/berthdev/berth/internal/netpolicy"
)

// Config configures the egress of every sandbox of a daemon.
type Config struct {
	// Limits are the daemon-wide defaults and hard limits every sandbox's
	// policy is held to; the Service adds the host's own addresses to
	// Limits.Blocked.
	Limits netpolicy.Limits
	// DNSServer, when set, is the resolver (host:port) Berth asks for the
	// sandboxes; by default the host's.
	DNSServer string
	// DialNetNS, when set, is a network namespace (a path such as
	// /run/netns/egress) the connections to destinations are made from,
	// instead of the daemon's own.
	DialNetNS string
	// RootCAs verify the servers of hosts with bound secrets; nil means the
	// host's roots.
	RootCAs *x509.CertPool
	// MaxConnsPerSandbox and MaxConns bound open connections (default 512
	// and 16384).
	MaxConnsPerSandbox int
	MaxConns           int
	// IdleTimeout ends a connection nothing crossed for that long (default
	// 5 minutes); MaxLifetime ends any connection (default 6 hours).
	IdleTimeout time.Duration
	MaxLifetime time.Duration
	// LogSize is how many connections each sandbox's log keeps (default 1000).
	LogSize int
	Logger  *slog.Logger
}

// Sandbox is what the Service needs of one sandbox to serve its egress.
type Sandbox struct {
	ID  string
	Dir string // the sandbox's directory: the namespace is pinned in it
	// Policy is the sandbox's own; Mode must be egress.
	Policy  netpolicy.Policy
	Secrets []broker.Secret
	CA      *broker.CA
}

// Service serves the network of every egress sandbox: a namespace each,
// whose one device leads to a user-space TCP/IP stack of its own in the
// daemon, where every connection is decided (see doc.go).
type Service struct {
	cfg     Config
	logger  *slog.Logger
	store   KeyStore
	sealer  *broker.Sealer
	metrics *metrics
	dialer  *nsDialer
	res     *net.Resolver
	conns   chan struct{} // daemon-wide connection slots

	mu    sync.Mutex // guards links, hostIPs and roots
	links map[string]*link
	// roots is the host's CA bundle, as of rootsMod and rootsSize.
	roots     []byte
	rootsMod  time.Time
	rootsSize int64
	// hostIPs are the host's own addresses, refreshed now and then: no
	// sandbox may reach them (NET-04).
	hostIPs   []netip.Prefix
	hostIPsAt time.Time
}

// defaults fills in cfg's zero values.
func (cfg *Config) defaults() {
	if cfg.MaxConnsPerSandbox <= 0 {
		cfg.MaxConnsPerSandbox = 512
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 16384
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = 6 * time.Hour
	}
	if cfg.LogSize <= 0 {
		cfg.LogSize = 1000
	}
	if len(cfg.Limits.DefaultPorts) == 0 {
		cfg.Limits.DefaultPorts = []int{80, 443}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// lookup resolves name to its addresses with the configured resolver.
func (s *Service) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	ips, err := s.res.LookupNetIP(ctx, "ip4", name)
	for i, ip := range ips {
		ips[i] = ip.Unmap()
	}
	return ips, err
}

// limits returns the daemon's limits with the host's current addresses
// blocked.
func (s *Service) limits() netpolicy.Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.hostIPsAt) > 30*time.Second {
		s.hostIPs = hostAddrs(s.cfg.DialNetNS)
		s.hostIPsAt = time.Now()
	}
	lim := s.cfg.Limits
	lim.Blocked = append(append([]netip.Prefix(nil), lim.Blocked...), s.hostIPs...)
	return lim
}

// hostAddrs lists the addresses of the daemon's interfaces, and of the
// dialing namespace's when there is one.
func hostAddrs(dialNS string) []netip.Prefix {
	var out []netip.Prefix
	add := func() error {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					ip = ip.Unmap()
					out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
				}
			}
		}
		return nil
	}
	_ = add()
	if dialNS != "" {
		_ = InNetNS(dialNS, add)
	}
	return out
}
