//go:build !linux

package egress

import (
	"context"

	"github.com/berthdev/berth/internal/broker"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
)

// Egress needs Linux: network namespaces and TAP devices.

type link struct{}

type nsDialer struct{}

func (*nsDialer) Close() {}

// New says egress is unavailable.
func New(Config, KeyStore, *broker.Sealer) (*Service, error) {
	return nil, errcode.NetworkUnavailable.New("egress networking needs Linux")
}

func (s *Service) Close() {}

func (s *Service) serve(context.Context, Sandbox) (string, error) {
	return "", errcode.NetworkUnavailable.New("egress networking needs Linux")
}

func (s *Service) down(string, string) error                      { return nil }
func (s *Service) setPolicy(string, netpolicy.Policy)             {}
func (s *Service) setSecrets(string, []broker.Secret, *broker.CA) {}
func (s *Service) log(string, int) ([]Entry, bool)                { return nil, false }

var gatewayAddr = "172.31.255.1"

func InNetNS(string, func() error) error {
	return errcode.NetworkUnavailable.New("egress networking needs Linux")
}
