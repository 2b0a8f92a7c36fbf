package egress

import (
	"bytes"
	"context"
	"encoding/json"
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

// CABundlePath is where a sandbox finds its CA bundle: the host's roots
// and its own egress CA. SSL_CERT_FILE, NODE_EXTRA_CA_CERTS,
// REQUESTS_CA_BUNDLE and PIP_CERT name it for every command.
const CABundlePath = sandbox.EgressCABundle

// hostBundle is the host's CA bundle, which a sandbox's extends.
const hostBundle = "/etc/ssl/certs/ca-certificates.crt"

// Limits are the daemon-wide defaults and limits.
func (s *Service) Limits() netpolicy.Limits { return s.cfg.Limits }

// Up serves sb's egress and returns what its runtime must give it: the
// namespace, a resolv.conf naming Berth's resolver, and a CA bundle that
// trusts its own CA.
func (s *Service) Up(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout) (*sandbox.NetworkSetup, error) {
	ca, secrets, err := s.keys(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(l.Dir, "net")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bundle, err := os.ReadFile(hostBundle)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading the host's CA bundle: %w", err)
	}
	bundle = append(bytes.TrimRight(bundle, "\n"), '\n')
	bundle = append(bundle, ca.CertPEM()...)
	files := map[string][]byte{
		"resolv.conf": fmt.Appendf(nil, "nameserver %s\noptions timeout:2 attempts:2\n", gatewayAddr),
		"ca-bundle":   bundle,
	}
	for name, b := range files {
		if err := writeFile(filepath.Join(dir, name), b); err != nil {
			return nil, err
		}
	}
	netns, err := s.serve(ctx, Sandbox{ID: sb.ID, Dir: l.Dir, Policy: sb.Network, Secrets: secrets, CA: ca})
	if err != nil {
		return nil, err
	}
	return &sandbox.NetworkSetup{NetNS: netns, Files: map[string]string{
		"/etc/resolv.conf": filepath.Join(dir, "resolv.conf"),
		CABundlePath:       filepath.Join(dir, "ca-bundle"),
	}}, nil
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
	_, current, err := s.keys(ctx, sb.ID)
	if err != nil {
		return err
	}
	var cur []apitype.Secret
	for _, c := range current {
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
	for i, sec := range list {
		field := fmt.Sprintf("secrets[%d]", i)
		host := strings.TrimSuffix(strings.ToLower(sec.Host), ".")
		header := http.CanonicalHeaderKey(sec.Header)
		switch {
		case !validHost(host):
			problems[field+".host"] = fmt.Sprintf("%q is not a host name (an exact name such as api.example.com)", sec.Host)
		case !validHeader(header):
			problems[field+".header"] = fmt.Sprintf("%q is not a header a secret may set (a token; not Host, Connection or a hop-by-hop or framing header)", sec.Header)
		case sec.Value == "" || strings.ContainsAny(sec.Value, "\r\n\x00") || len(sec.Value) > 8<<10:
			problems[field+".value"] = "must be 1-8192 bytes with no line breaks or NUL"
		case seen[host+"\x00"+header]:
			problems[field] = fmt.Sprintf("%s is bound twice for %s", header, host)
		default:
			if d := netpolicy.DecideName(sb.Network, lim, host); !d.Allowed {
				return errcode.SecretHostRefused.New("secrets[%d]: the sandbox's policy refuses %s (%s: %s), so a secret for it would never be used; nothing was changed", i, host, d.Reason, d.Detail)
			}
		}
		seen[host+"\x00"+header] = true
		secrets = append(secrets, broker.Secret{Host: host, Header: header, Value: sec.Value})
	}
	if len(problems) > 0 {
		return errcode.InvalidFields(problems)
	}
	ca, _, err := s.keys(ctx, sb.ID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(secretsJSON(secrets))
	if err != nil {
		return err
	}
	k, err := s.store.GetNetworkKeys(ctx, sb.ID)
	if err != nil {
		return err
	}
	if k.Secrets, err = s.sealer.Seal(b, sb.ID+"/secrets"); err != nil {
		return err
	}
	if err := s.store.PutNetworkKeys(ctx, sb.ID, k); err != nil {
		return err
	}
	s.setSecrets(sb.ID, secrets, ca)
	return nil
}

// Secrets lists sb's secrets without their values.
func (s *Service) Secrets(ctx context.Context, sb *sandbox.Sandbox) ([]apitype.Secret, error) {
	_, secrets, err := s.keys(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	out := []apitype.Secret{}
	for _, sec := range secrets {
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

// keys returns sandbox id's CA, made and stored on first use, and its
// secrets.
func (s *Service) keys(ctx context.Context, id string) (*broker.CA, []broker.Secret, error) {
	if s.store == nil || s.sealer == nil {
		return nil, nil, errcode.NetworkUnavailable.New("egress has no key store")
	}
	k, err := s.store.GetNetworkKeys(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if k != nil {
		ca, secrets, err := s.openKeys(id, k)
		if err == nil {
			return ca, secrets, nil
		}
		// The data directory's egress.key is not the one that sealed
		// them (lost, or replaced): they cannot be read by anyone. The
		// sandbox gets a new CA, and its secrets must be set again;
		// refusing would leave it unable to start, for good.
		s.logger.WarnContext(ctx, "egress keys unreadable: a new CA is made and the secrets are dropped; set them again",
			"sandbox_id", id, "err", err)
	}
	{
		ca, err := broker.NewCA(id)
		if err != nil {
			return nil, nil, err
		}
		der, err := ca.MarshalKey()
		if err != nil {
			return nil, nil, err
		}
		sealed, err := s.sealer.Seal(der, id+"/ca")
		if err != nil {
			return nil, nil, err
		}
		if err := s.store.PutNetworkKeys(ctx, id, &store.NetworkKeys{CACert: ca.CertPEM(), CAKey: sealed}); err != nil {
			return nil, nil, err
		}
		return ca, nil, nil
	}
}

// openKeys opens a sandbox's stored CA key and secrets.
func (s *Service) openKeys(id string, k *store.NetworkKeys) (*broker.CA, []broker.Secret, error) {
	der, err := s.sealer.Open(k.CAKey, id+"/ca")
	if err != nil {
		return nil, nil, fmt.Errorf("opening sandbox %s's CA key (is this the data directory's own egress key?): %w", id, err)
	}
	ca, err := broker.LoadCA(k.CACert, der)
	if err != nil {
		return nil, nil, err
	}
	var secrets []broker.Secret
	if len(k.Secrets) > 0 {
		b, err := s.sealer.Open(k.Secrets, id+"/secrets")
		if err != nil {
			return nil, nil, fmt.Errorf("opening sandbox %s's secrets: %w", id, err)
		}
		var list []secretJSON
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, nil, fmt.Errorf("reading sandbox %s's secrets: %w", id, err)
		}
		for _, sj := range list {
			secrets = append(secrets, broker.Secret{Host: sj.Host, Header: sj.Header, Value: sj.Value})
		}
	}
	return ca, secrets, nil
}

// validHost reports whether host is an exact DNS name.
func validHost(host string) bool {
	if host == "" || len(host) > 253 || strings.HasPrefix(host, "*") {
		return false
	}
	_, err := netpolicy.ParseEntry(host)
	return err == nil && !strings.ContainsAny(host, ":/[]") && hostName(host) == host
}

// refusedHeaders may not be set by a secret: they frame or route the
// request.
var refusedHeaders = []string{"Host", "Connection", "Content-Length", "Transfer-Encoding", "Keep-Alive", "Proxy-Connection",
	"Te", "Trailer", "Upgrade", "Proxy-Authenticate"}

func validHeader(h string) bool {
	if h == "" || len(h) > 128 || slices.Contains(refusedHeaders, h) {
		return false
	}
	for _, c := range h {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
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
