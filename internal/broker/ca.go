package broker

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

const (
	// caLifetime is how long a sandbox CA is valid. The CA lives as long as
	// the sandbox and sandboxes are not expected to outlive it.
	caLifetime = 10 * 365 * 24 * time.Hour
	// leafLifetime is how long a leaf certificate is valid.
	leafLifetime = 7 * 24 * time.Hour
	// leafRenewBefore is how close to expiry a cached leaf is replaced, so
	// a long-lived sandbox never sees an expired one.
	leafRenewBefore = 24 * time.Hour
	// backdate moves NotBefore into the past to tolerate a sandbox clock
	// that runs a little behind the daemon's.
	backdate = time.Hour
	// leafCacheSize bounds the number of leaf certificates a CA keeps.
	leafCacheSize = 256
)

// CA is a sandbox's own certificate authority: the sandbox trusts it, and
// nothing else does. Its key is ECDSA P-256, it is valid for ten years from
// an hour before its creation, and it may sign only server leaf
// certificates (path length 0, extended key usage serverAuth).
//
// A CA is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey

	// mu guards leaves and lru.
	mu sync.Mutex
	// leaves maps a host to its element in lru, whose Value is a *leafEntry.
	leaves map[string]*list.Element
	// lru orders the cached leaves, most recently used first.
	lru *list.List
}

// leafEntry is a cached leaf certificate.
type leafEntry struct {
	host     string
	cert     *tls.Certificate
	notAfter time.Time
}

// NewCA makes a new CA for the sandbox with the given ID. Its common name is
// "Berth sandbox <id> egress CA".
func NewCA(sandboxID string) (*CA, error) {
	if sandboxID == "" {
		return nil, errors.New("creating sandbox CA: empty sandbox id")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore := time.Now().Add(-backdate)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"Berth"},
			CommonName:   "Berth sandbox " + sandboxID + " egress CA",
		},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new CA certificate: %w", err)
	}
	return newCA(cert, key), nil
}

// LoadCA rebuilds a CA from what CertPEM and MarshalKey returned. It checks
// that the certificate is a CA certificate and that the key belongs to it.
func LoadCA(certPEM, keyDER []byte) (*CA, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("loading sandbox CA: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("loading sandbox CA: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, errors.New("loading sandbox CA: certificate is not a CA")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("loading sandbox CA key: %w", err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("loading sandbox CA key: %T is not an ECDSA key", parsed)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("loading sandbox CA: key does not match certificate")
	}
	return newCA(cert, key), nil
}

func newCA(cert *x509.Certificate, key *ecdsa.PrivateKey) *CA {
	return &CA{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key:     key,
		leaves:  make(map[string]*list.Element),
		lru:     list.New(),
	}
}

// CertPEM returns the CA certificate in PEM form: what goes into the
// sandbox's CA bundle. The caller must not modify it.
func (c *CA) CertPEM() []byte { return c.certPEM }

// MarshalKey returns the CA's private key as PKCS #8 DER, for sealing and
// storing.
func (c *CA) MarshalKey() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.key)
	if err != nil {
		return nil, fmt.Errorf("marshaling CA key: %w", err)
	}
	return der, nil
}

// Leaf returns a server certificate for host, a DNS name (compared without
// regard to case; IP addresses are refused, as TLS server names cannot be
// IPs). It is ECDSA P-256, valid for seven days and signed by the CA.
// Certificates are made once per host and cached, up to 256 hosts with the
// least recently used dropped first; one within a day of expiry is replaced.
func (c *CA) Leaf(host string) (*tls.Certificate, error) {
	host = strings.ToLower(host)
	if !validHost(host) {
		return nil, fmt.Errorf("making certificate: %q is not a DNS name", host)
	}
	now := time.Now()

	// Making a leaf takes well under a millisecond, so it is done under the
	// lock: concurrent callers for one host then share a single leaf.
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.leaves[host]; ok {
		e := el.Value.(*leafEntry)
		if now.Add(leafRenewBefore).Before(e.notAfter) {
			c.lru.MoveToFront(el)
			return e.cert, nil
		}
		c.lru.Remove(el)
		delete(c.leaves, host)
	}
	e, err := c.makeLeaf(host, now)
	if err != nil {
		return nil, err
	}
	c.leaves[host] = c.lru.PushFront(e)
	for c.lru.Len() > leafCacheSize {
		old := c.lru.Remove(c.lru.Back()).(*leafEntry)
		delete(c.leaves, old.host)
	}
	return e.cert, nil
}

// makeLeaf creates a leaf certificate for host.
func (c *CA) makeLeaf(host string, now time.Time) (*leafEntry, error) {
	notAfter := now.Add(leafLifetime)
	if notAfter.After(c.cert.NotAfter) {
		notAfter = c.cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("making certificate for %s: sandbox CA expired at %s", host, c.cert.NotAfter.Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key for %s: %w", host, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{host},
	}
	// The common name is informational (verifiers use DNSNames) and X.509
	// limits it to 64 characters.
	if len(host) <= 64 {
		tmpl.Subject.CommonName = host
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, fmt.Errorf("creating certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate for %s: %w", host, err)
	}
	return &leafEntry{
		host: host,
		// The chain is the leaf alone: the sandbox has the CA as a root,
		// and sending a root is wasted bytes.
		cert:     &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		notAfter: notAfter,
	}, nil
}

// randomSerial returns a random positive 128-bit certificate serial number.
func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// validHost reports whether host is a lowercase DNS name such as a TLS
// client sends as its server name: dot-separated labels of letters, digits,
// hyphens and underscores, no port, no trailing dot, not an IP address.
func validHost(host string) bool {
	if host == "" || len(host) > 253 || net.ParseIP(host) != nil {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_') {
				return false
			}
		}
	}
	return true
}
