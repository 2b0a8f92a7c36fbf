package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/egress"
)

// Internet is a test's own internet, in network namespaces it makes: a
// namespace the daemon makes its outbound connections from (Out, whose
// one address 198.51.100.1 plays the host's), joined by a veth pair to a
// namespace of servers (In): plain HTTP on HTTPIP:80, HTTPS on HTTPSIP:443
// with a certificate from the test's own CA, and a DNS server on
// DNSIP:53 that answers from Names. Their prefix, 198.51.100.0/24
// (TEST-NET-2), is special-purpose: the daemon is told to treat it as
// public. Nothing touches the host's own network.
type Internet struct {
	Out, In string // network namespace paths
	CAFile  string // the test CA (PEM), for --egress-ca-file
	CA      *x509.CertPool

	mu       sync.Mutex // guards the fields below
	names    map[string][]string
	queries  []string            // names the DNS server was asked, in order
	headers  map[string][]string // last request's headers on the HTTPS server, by header
	counts   map[string]int      // packets seen arriving in In, by kind
	requests int                 // requests the HTTP and HTTPS servers served
}

// Addresses of the test internet.
const (
	InternetGateway = "198.51.100.1" // the dialing namespace's address: a "host address"
	InternetHTTPIP  = "198.51.100.10"
	InternetHTTPSIP = "198.51.100.11"
	InternetOtherIP = "198.51.100.12" // HTTP too, for a second destination
	InternetDNSIP   = "198.51.100.53"
	InternetPrefix  = "198.51.100.0/24"
	InternetHost    = "api.test.example" // the HTTPS server's name
)

// NewInternet makes the namespaces and servers; cleanup removes them all.
func NewInternet(t testing.TB) *Internet {
	t.Helper()
	NeedLinux(t)
	NeedRoot(t)
	ip := NeedCommand(t, "ip")
	suffix := hex.EncodeToString(randBytes(4))
	in := &Internet{
		Out: "/run/netns/bt-out-" + suffix, In: "/run/netns/bt-in-" + suffix,
		names: map[string][]string{
			"www.test.example":   {InternetHTTPIP},
			InternetHost:         {InternetHTTPSIP},
			"other.test.example": {InternetOtherIP},
			"meta.test.example":  {"169.254.169.254"},
			"host.test.example":  {InternetGateway},
		},
		headers: map[string][]string{}, counts: map[string]int{},
	}
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	outName, inName := filepath.Base(in.Out), filepath.Base(in.In)
	sh("netns", "add", outName)
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "del", outName).Run() })
	sh("netns", "add", inName)
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "del", inName).Run() })
	// No IPv6 on the test internet's own links: their router solicitations
	// and multicast reports would count as IPv6 packets reaching it.
	for _, ns := range []string{in.Out, in.In} {
		if err := egress.InNetNS(ns, func() error {
			for _, k := range []string{"all", "default"} {
				if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("disabling IPv6 in the test internet: %v", err)
		}
	}
	sh("link", "add", "bto"+suffix, "netns", outName, "type", "veth", "peer", "name", "bti"+suffix, "netns", inName)
	sh("-n", outName, "addr", "add", InternetGateway+"/24", "dev", "bto"+suffix)
	sh("-n", outName, "link", "set", "bto"+suffix, "up")
	sh("-n", outName, "link", "set", "lo", "up")
	sh("-n", inName, "addr", "add", "198.51.100.2/24", "dev", "bti"+suffix)
	sh("-n", inName, "link", "set", "bti"+suffix, "up")
	sh("-n", inName, "link", "set", "lo", "up")
	for _, a := range []string{InternetHTTPIP, InternetHTTPSIP, InternetOtherIP, InternetDNSIP} {
		sh("-n", inName, "addr", "add", a+"/32", "dev", "lo")
	}

	// The test CA and the HTTPS server's certificate.
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Berth test internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	in.CA = x509.NewCertPool()
	in.CA.AddCert(caCert)
	in.CAFile = filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(in.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: InternetHost}, DNSNames: []string{InternetHost, "*.test.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		in.mu.Lock()
		in.requests++
		if r.TLS != nil {
			in.headers = r.Header.Clone()
		}
		in.mu.Unlock()
		fmt.Fprintf(w, "hello from the test internet (%s)\n", r.Host)
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.PathValue("code"))
		if err != nil || code < 200 || code > 599 {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
		if r.URL.Query().Has("empty") {
			return // Chromium fails the navigation of an empty error page
		}
		fmt.Fprintf(w, "status %d from the test internet\n", code)
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		// The page is the query's body: a test's own HTML, from the internet.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, r.URL.Query().Get("body"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		_, _ = io.CopyN(w, zeros{}, n)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// Trickles a byte a second for a minute: an open connection.
		for i := 0; i < 60; i++ {
			if _, err := w.Write([]byte(".")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	if gitBackend, err := exec.LookPath("git"); err == nil {
		// Smart HTTP for git clone over HTTPS: a bare repository with one
		// commit, served by git http-backend.
		repos := t.TempDir()
		if err := makeRepo(gitBackend, filepath.Join(repos, "repo.git")); err != nil {
			t.Fatal(err)
		}
		mux.Handle("/git/", &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend", Root: "/git",
			Env: []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1"}})
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	t.Cleanup(func() { srv.Close() })
	for _, a := range []string{InternetHTTPIP + ":80", InternetOtherIP + ":80"} {
		ln := in.listen(t, "tcp", a)
		go func() { _ = srv.Serve(ln) }()
	}
	tlsLn := tls.NewListener(in.listen(t, "tcp", InternetHTTPSIP+":443"), &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}})
	go func() { _ = srv.Serve(tlsLn) }()

	var pc net.PacketConn
	err = egress.InNetNS(in.In, func() (err error) {
		pc, err = net.ListenPacket("udp", InternetDNSIP+":53")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go in.serveDNS(pc)
	in.sniff(t, "bti"+suffix)
	return in
}

// Apply points a daemon config at this internet.
func (in *Internet) Apply(cfg *daemon.Config) {
	cfg.Egress.NetNS = in.Out
	cfg.Egress.Public = []string{InternetPrefix}
	cfg.Egress.DNS = InternetDNSIP + ":53"
	cfg.Egress.CAFile = in.CAFile
}

// Args are the berth serve flags that point a daemon at this internet.
func (in *Internet) Args() []string {
	return []string{"--egress-netns", in.Out, "--egress-public", InternetPrefix, "--egress-dns", InternetDNSIP + ":53",
		"--egress-ca-file", in.CAFile}
}

// SetName makes the DNS server answer name with addrs from now on.
func (in *Internet) SetName(name string, addrs ...string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.names[name] = addrs
}

// Queries returns the names the DNS server has been asked.
func (in *Internet) Queries() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.queries...)
}

// Header returns the values of header in the last request the HTTPS
// server served.
func (in *Internet) Header(name string) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.headers[http.CanonicalHeaderKey(name)]
}

// Requests returns how many requests the web servers served.
func (in *Internet) Requests() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.requests
}

// Packets returns how many packets of kind ("udp" other than DNS, "icmp",
// "ipv6", "other": not IPv4 TCP, UDP, ICMP or ARP) arrived at the servers.
func (in *Internet) Packets(kind string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.counts[kind]
}

// listen makes a listener inside the servers' namespace.
func (in *Internet) listen(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := egress.InNetNS(in.In, func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func (in *Internet) serveDNS(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
		in.mu.Lock()
		in.queries = append(in.queries, name)
		addrs, ok := in.names[name]
		in.mu.Unlock()
		rcode := dnsmessage.RCodeSuccess
		if !ok {
			rcode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if q.Type == dnsmessage.TypeA {
			for _, a := range addrs {
				if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
					_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
						dnsmessage.AResource{A: ip.As4()})
				}
			}
		}
		if out, err := b.Finish(); err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// sniff counts the packets arriving at the servers' end of the veth.
func (in *Internet) sniff(t testing.TB, dev string) {
	t.Helper()
	var fd int
	err := egress.InNetNS(in.In, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("sniffing the test internet: %v", err)
	}
	f := os.NewFile(uintptr(fd), "sniff")
	t.Cleanup(func() { f.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			in.count(buf[:n])
		}
	}()
}

func (in *Internet) count(frame []byte) {
	if len(frame) < 14 {
		return
	}
	kind := "other"
	switch binary.BigEndian.Uint16(frame[12:14]) {
	case 0x0806:
		return // ARP
	case 0x86dd:
		kind = "ipv6"
	case 0x0800:
		ipHdr := frame[14:]
		if len(ipHdr) < 20 {
			break
		}
		ihl := int(ipHdr[0]&0x0f) * 4
		switch ipHdr[9] {
		case unix.IPPROTO_TCP:
			return
		case unix.IPPROTO_ICMP:
			kind = "icmp"
		case unix.IPPROTO_UDP:
			if len(ipHdr) >= ihl+4 && binary.BigEndian.Uint16(ipHdr[ihl+2:ihl+4]) == 53 {
				return // a DNS query from Berth's resolver
			}
			kind = "udp"
		}
	}
	in.mu.Lock()
	in.counts[kind]++
	in.mu.Unlock()
}

func makeRepo(git, dir string) error {
	work := dir + ".work"
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "hello from the test internet"},
		{"clone", "-q", "--bare", work, dir},
		{"-C", dir, "config", "http.receivepack", "false"},
	} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
