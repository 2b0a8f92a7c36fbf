package broker

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCALeafVerifies(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	leaf, err := ca.Leaf("api.example.com")
	if err != nil {
		t.Fatalf("Leaf: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CertPEM holds no certificate")
	}
	verify := func(name string) error {
		_, err := leaf.Leaf.Verify(x509.VerifyOptions{
			DNSName:   name,
			Roots:     roots,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		return err
	}
	if err := verify("api.example.com"); err != nil {
		t.Errorf("leaf does not verify for its host: %v", err)
	}
	var herr x509.HostnameError
	if err := verify("other.example.com"); !errors.As(err, &herr) {
		t.Errorf("verify for another host: error = %v, want x509.HostnameError", err)
	}
	// The leaf must not verify against an unrelated CA: the trust comes
	// from this CA alone.
	other := x509.NewCertPool()
	other.AppendCertsFromPEM(newTestCA(t).CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: other}); err == nil {
		t.Errorf("leaf verifies against another sandbox's CA")
	}

	if got, want := leaf.Leaf.NotAfter.Sub(leaf.Leaf.NotBefore), leafLifetime+backdate; got != want {
		t.Errorf("leaf validity = %v, want %v", got, want)
	}
}

func TestNewCACertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	c := ca.cert
	if got, want := c.Subject.CommonName, "Berth sandbox sbx_test egress CA"; got != want {
		t.Errorf("CommonName = %q, want %q", got, want)
	}
	if !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("IsCA, MaxPathLen, MaxPathLenZero = %v, %d, %v; want true, 0, true", c.IsCA, c.MaxPathLen, c.MaxPathLenZero)
	}
	if start := time.Until(c.NotBefore); start > -59*time.Minute || start < -61*time.Minute {
		t.Errorf("NotBefore is %v from now, want about -1h", start)
	}
	if got := c.NotAfter.Sub(c.NotBefore); got != caLifetime {
		t.Errorf("validity = %v, want %v", got, caLifetime)
	}
	if c.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("PublicKeyAlgorithm = %v, want ECDSA", c.PublicKeyAlgorithm)
	}
}

func TestLoadCARoundTrip(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	key, err := ca.MarshalKey()
	if err != nil {
		t.Fatalf("MarshalKey: %v", err)
	}
	loaded, err := LoadCA(ca.CertPEM(), key)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	if string(loaded.CertPEM()) != string(ca.CertPEM()) {
		t.Errorf("loaded CertPEM differs from the original")
	}
	leaf, err := loaded.Leaf("example.com")
	if err != nil {
		t.Fatalf("Leaf: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err != nil {
		t.Errorf("leaf of loaded CA does not verify against the original: %v", err)
	}

	otherKey, err := newTestCA(t).MarshalKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(ca.CertPEM(), otherKey); err == nil {
		t.Errorf("LoadCA with another CA's key succeeded, want error")
	}
	if _, err := LoadCA([]byte("not pem"), key); err == nil {
		t.Errorf("LoadCA with garbage certificate succeeded, want error")
	}
	if _, err := LoadCA(ca.CertPEM(), []byte("not der")); err == nil {
		t.Errorf("LoadCA with garbage key succeeded, want error")
	}
	leafPEM := pemCert(leaf.Certificate[0])
	leafKey, _ := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if _, err := LoadCA(leafPEM, leafKey); err == nil {
		t.Errorf("LoadCA with a leaf certificate succeeded, want error")
	}
}

func TestCALeafCache(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	a1, err := ca.Leaf("a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := ca.Leaf("A.Example.COM")
	if a1 != a2 {
		t.Errorf("second Leaf for one host made a new certificate, want the cached one")
	}
	b, _ := ca.Leaf("b.example.com")
	if b == a1 {
		t.Errorf("Leaf for another host returned the same certificate")
	}

	// Fill the cache past its bound: a, used least recently, is evicted.
	for i := range leafCacheSize {
		if _, err := ca.Leaf(fmt.Sprintf("h%d.example.com", i)); err != nil {
			t.Fatal(err)
		}
	}
	ca.mu.Lock()
	n := ca.lru.Len()
	ca.mu.Unlock()
	if n != leafCacheSize {
		t.Errorf("cache holds %d leaves, want %d", n, leafCacheSize)
	}
	if a3, _ := ca.Leaf("a.example.com"); a3 == a1 {
		t.Errorf("Leaf after eviction returned the evicted certificate")
	}
}

func TestCALeafRejectsBadHosts(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	for _, host := range []string{"", "127.0.0.1", "::1", "example.com:443", "a..b", ".example.com", "example.com.", "ex ample.com", strings.Repeat("a", 64) + ".com"} {
		if _, err := ca.Leaf(host); err == nil {
			t.Errorf("Leaf(%q) succeeded, want error", host)
		}
	}
	// Positive control: valid names of the same shapes.
	for _, host := range []string{"localhost", "a-b.example.com", "_dmarc.example.com", strings.Repeat("a", 63) + ".com"} {
		if _, err := ca.Leaf(host); err != nil {
			t.Errorf("Leaf(%q) error = %v, want success", host, err)
		}
	}
}

func TestNewCARejectsEmptyID(t *testing.T) {
	t.Parallel()
	if _, err := NewCA(""); err == nil {
		t.Errorf("NewCA(\"\") succeeded, want error")
	}
}

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("sbx_test")
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
