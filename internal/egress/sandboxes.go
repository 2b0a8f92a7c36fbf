package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/broker"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
)

// The Service is the sandbox Manager's Network.
var _ sandbox.Network = (*Service)(nil)

// KeyStore keeps each egress sandbox's CA and secrets (sealed).
type KeyStore interface {
	GetNetworkKeys(ctx context.Context, id string) (*store.NetworkKeys, error)
	PutNetworkKeys(ctx context.Context, id string, k *store.NetworkKeys) error
}

// hostBundle is the host's CA bundle, which a sandbox's extends.
const hostBundle = "/etc/ssl/certs/ca-certificates.crt"

// Limits are the daemon-wide defaults and limits.
func (s *Service) Limits() netpolicy.Limits { return s.cfg.Limits }

// Up serves sb's egress and returns what its runtime must give it: the
// namespace, a resolv.conf naming Berth's resolver, and a CA bundle that
// trusts its own CA.
func (s *Service) Up(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout) (*sandbox.NetworkSetup, error) {
	k, err := s.keys(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(l.Dir, "net")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	roots, err := s.hostRoots()
	if err != nil {
		return nil, err
	}
	bundle := append(append(slices.Clip(roots), '\n'), k.ca.CertPEM()...)
	files := map[string][]byte{
		"resolv.conf": fmt.Appendf(nil, "nameserver %s\noptions timeout:2 attempts:2\n", gatewayAddr),
		"ca-bundle":   bundle,
	}
	for name, b := range files {
		if err := writeFile(filepath.Join(dir, name), b); err != nil {
			return nil, err
		}
	}
	netns, err := s.serve(ctx, Sandbox{ID: sb.ID, Dir: l.Dir, Policy: sb.Network, Secrets: k.secrets, CA: k.ca})
	if err != nil {
		return nil, err
	}
	return &sandbox.NetworkSetup{NetNS: netns, Files: map[string]string{
		"/etc/resolv.conf":     filepath.Join(dir, "resolv.conf"),
		sandbox.EgressCABundle: filepath.Join(dir, "ca-bundle"),
	}}, nil
}

// hostRoots returns the host's CA bundle without its final newlines, read
// again only when the file changed (every egress sandbox's start extends
// it).
func (s *Service) hostRoots() ([]byte, error) {
	fi, err := os.Stat(hostBundle)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the host's CA bundle: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roots != nil && fi.ModTime().Equal(s.rootsMod) && fi.Size() == s.rootsSize {
		return s.roots, nil
	}
	b, err := os.ReadFile(hostBundle)
	if err != nil {
		return nil, fmt.Errorf("reading the host's CA bundle: %w", err)
	}
	s.roots, s.rootsMod, s.rootsSize = bytes.TrimRight(b, "\n"), fi.ModTime(), fi.Size()
	return s.roots, nil
}

// Down stops serving sandbox id's egress.
func (s *Service) Down(id string, l sandbox.Layout) error { return s.down(id, l.Dir) }

// Update applies sb's policy to its served egress.
func (s *Service) Update(ctx context.Context, sb *sandbox.Sandbox) error {
	s.setPolicy(sb.ID, sb.Network)
	return nil
}

// Log returns sandbox id's connection log, newest first.
func (s *Service) Log(id string, limit int) []apitype.NetworkLogEntry {
	entries, _ := s.log(id, limit)
	if entries == nil {
		entries = []apitype.NetworkLogEntry{}
	}
	return entries
}

// maxSecrets bounds the secrets of one sandbox.
const maxSecrets = 64

// EditSecrets replaces sb's secrets with edit's result, validated, sealed,
// stored and applied. Nothing is changed when any is invalid.
func (s *Service) EditSecrets(ctx context.Context, sb *sandbox.Sandbox, edit func([]apitype.Secret) []apitype.Secret) error {
	k, err := s.keys(ctx, sb.ID)
	if err != nil {
		return err
	}
	var cur []apitype.Secret
	for _, c := range k.secrets {
		cur = append(cur, apitype.Secret{Host: c.Host, Header: c.Header, Value: c.Value})
	}
	list := edit(cur)
	problems := map[string]string{}
	if len(list) > maxSecrets {
		problems["secrets"] = fmt.Sprintf("at most %d secrets", maxSecrets)
	}
	seen := map[string]bool{}
	lim := s.limits()
	var secrets []broker.Secret
	for i, in := range list {
		field := fmt.Sprintf("secrets[%d]", i)
		sec := broker.Secret{Host: strings.TrimSuffix(strings.ToLower(in.Host), "."),
			Header: http.CanonicalHeaderKey(in.Header), Value: in.Value}
		if f, why := sec.Problem(); f != "" {
			problems[field+"."+f] = why
			continue
		}
		if seen[sec.Host+"\x00"+sec.Header] {
			problems[field] = fmt.Sprintf("%s is bound twice for %s", sec.Header, sec.Host)
			continue
		}
		if d := netpolicy.DecideName(sb.Network, lim, sec.Host); !d.Allowed {
			return errcode.SecretHostRefused.New("secrets[%d]: the sandbox's policy refuses %s (%s: %s), so a secret for it would never be used; nothing was changed", i, sec.Host, d.Reason, d.Detail)
		}
		seen[sec.Host+"\x00"+sec.Header] = true
		secrets = append(secrets, sec)
	}
	if len(problems) > 0 {
		return errcode.InvalidFields(problems)
	}
	b, err := json.Marshal(secretsJSON(secrets))
	if err != nil {
		return err
	}
	stored := *k.stored
	if stored.Secrets, err = s.sealer.Seal(b, sb.ID+"/secrets"); err != nil {
		return err
	}
	if err := s.store.PutNetworkKeys(ctx, sb.ID, &stored); err != nil {
		return err
	}
	s.setSecrets(sb.ID, secrets, k.ca)
	return nil
}

// Secrets lists sb's secrets without their values.
func (s *Service) Secrets(ctx context.Context, sb *sandbox.Sandbox) ([]apitype.Secret, error) {
	k, err := s.keys(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	out := []apitype.Secret{}
	for _, sec := range k.secrets {
		out = append(out, apitype.Secret{Host: sec.Host, Header: sec.Header})
	}
	return out, nil
}

// secretJSON is a secret as sealed (broker.Secret redacts itself in JSON).
type secretJSON struct {
	Host   string `json:"host"`
	Header string `json:"header"`
	Value  string `json:"value"`
}

func secretsJSON(list []broker.Secret) []secretJSON {
	out := make([]secretJSON, len(list))
	for i, s := range list {
		out[i] = secretJSON{s.Host, s.Header, s.Value}
	}
	return out
}

// sandboxKeys are a sandbox's CA and secrets, opened, and the record they
// were read from (or written to).
type sandboxKeys struct {
	ca      *broker.CA
	secrets []broker.Secret
	stored  *store.NetworkKeys
}

// keys returns sandbox id's keys: its CA, made and stored on first use,
// and its secrets.
func (s *Service) keys(ctx context.Context, id string) (*sandboxKeys, error) {
	if s.store == nil || s.sealer == nil {
		return nil, errcode.NetworkUnavailable.New("egress has no key store")
	}
	stored, err := s.store.GetNetworkKeys(ctx, id)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		k, err := s.openKeys(id, stored)
		if err == nil {
			return k, nil
		}
		// The data directory's egress.key is not the one that sealed
		// them (lost, or replaced): they cannot be read by anyone. The
		// sandbox gets a new CA, and its secrets must be set again;
		// refusing would leave it unable to start, for good.
		s.logger.WarnContext(ctx, "egress keys unreadable: a new CA is made and the secrets are dropped; set them again",
			"sandbox_id", id, "err", err)
	}
	ca, err := broker.NewCA(id)
	if err != nil {
		return nil, err
	}
	der, err := ca.MarshalKey()
	if err != nil {
		return nil, err
	}
	sealed, err := s.sealer.Seal(der, id+"/ca")
	if err != nil {
		return nil, err
	}
	stored = &store.NetworkKeys{CACert: ca.CertPEM(), CAKey: sealed}
	if err := s.store.PutNetworkKeys(ctx, id, stored); err != nil {
		return nil, err
	}
	return &sandboxKeys{ca: ca, stored: stored}, nil
}

// openKeys opens a sandbox's stored CA key and secrets.
func (s *Service) openKeys(id string, stored *store.NetworkKeys) (*sandboxKeys, error) {
	der, err := s.sealer.Open(stored.CAKey, id+"/ca")
	if err != nil {
		return nil, fmt.Errorf("opening sandbox %s's CA key (is this the data directory's own egress key?): %w", id, err)
	}
	k := &sandboxKeys{stored: stored}
	if k.ca, err = broker.LoadCA(stored.CACert, der); err != nil {
		return nil, err
	}
	if len(stored.Secrets) > 0 {
		b, err := s.sealer.Open(stored.Secrets, id+"/secrets")
		if err != nil {
			return nil, fmt.Errorf("opening sandbox %s's secrets: %w", id, err)
		}
		var list []secretJSON
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("reading sandbox %s's secrets: %w", id, err)
		}
		for _, sj := range list {
			k.secrets = append(k.secrets, broker.Secret{Host: sj.Host, Header: sj.Header, Value: sj.Value})
		}
	}
	return k, nil
}

// writeFile writes b to path whole (temp file and rename), readable by the
// sandbox.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
