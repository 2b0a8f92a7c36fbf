package daemon

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/berthdev/berth/internal/broker"
	"github.com/berthdev/berth/internal/egress"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/store"
)

// EgressConfig configures sandboxes' outbound network: the daemon-wide
// defaults and hard limits every sandbox's policy is held to.
type EgressConfig struct {
	Disabled bool
	// Ports are the ports of a policy that names none (default 80, 443);
	// PortLimit the only ports any policy may name (default Ports).
	Ports     []int
	PortLimit []int
	// Deny and AllowOnly apply to every sandbox, whatever its policy.
	Deny      []string
	AllowOnly []string
	// Public are prefixes treated as public although special-purpose: a
	// test's "internet", or an operator's services in private ranges.
	Public []string
	// DNS is the resolver Berth asks for sandboxes (host:port); "" uses
	// the host's.
	DNS string
	// NetNS is a network namespace to make outbound connections from.
	NetNS string
	// CAFile adds roots to verify upstream servers of hosts with secrets.
	CAFile string
	// MaxConns and MaxConnsPerSandbox bound open connections.
	MaxConns           int
	MaxConnsPerSandbox int
}

// newEgress builds the egress service, or nil when it is turned off or
// this host cannot serve it (it says why in the log).
func newEgress(cfg EgressConfig, dataDir string, db *store.DB, log *slog.Logger) (*egress.Service, error) {
	if cfg.Disabled {
		log.Info("egress network off (--egress=false)")
		return nil, nil
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		log.Info("egress network unavailable", "why", "berth serve must run as root on Linux to make network namespaces")
		return nil, nil
	}
	if len(cfg.Ports) == 0 {
		cfg.Ports = []int{80, 443}
	}
	if len(cfg.PortLimit) == 0 {
		// Conservative: only what the default opens (NET-14). An operator
		// widens it with --egress-port-limit.
		cfg.PortLimit = cfg.Ports
	}
	lim := netpolicy.Limits{DefaultPorts: cfg.Ports, PortLimit: cfg.PortLimit}
	var err error
	if lim.Deny, err = netpolicy.ParseEntries(cfg.Deny); err != nil {
		return nil, errcode.InvalidFields(map[string]string{"--egress-deny": err.Error()})
	}
	if lim.AllowOnly, err = netpolicy.ParseEntries(cfg.AllowOnly); err != nil {
		return nil, errcode.InvalidFields(map[string]string{"--egress-allow-only": err.Error()})
	}
	for _, p := range cfg.Public {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, errcode.InvalidFields(map[string]string{"--egress-public": fmt.Sprintf("%q is not a CIDR", p)})
		}
		lim.Public = append(lim.Public, pfx)
	}
	for flag, ports := range map[string][]int{"--egress-ports": cfg.Ports, "--egress-port-limit": cfg.PortLimit} {
		for _, port := range ports {
			if port < 1 || port > 65535 {
				return nil, errcode.InvalidFields(map[string]string{flag: fmt.Sprintf("port %d is not between 1 and 65535", port)})
			}
		}
	}
	var roots *x509.CertPool
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --egress-ca-file: %w", err)
		}
		if roots, err = x509.SystemCertPool(); err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(b) {
			return nil, errcode.InvalidFields(map[string]string{"--egress-ca-file": cfg.CAFile + " holds no PEM certificate"})
		}
	}
	sealer, err := broker.OpenSealer(filepath.Join(dataDir, EgressKeyFile))
	if err != nil {
		return nil, err
	}
	svc, err := egress.New(egress.Config{
		Limits: lim, DNSServer: cfg.DNS, DialNetNS: cfg.NetNS, RootCAs: roots,
		MaxConns: cfg.MaxConns, MaxConnsPerSandbox: cfg.MaxConnsPerSandbox, Logger: log,
	}, db, sealer)
	if err != nil {
		return nil, err
	}
	log.Info("egress network available", "ports", svc.Limits().DefaultPorts)
	return svc, nil
}
