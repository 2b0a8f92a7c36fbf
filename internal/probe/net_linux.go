package probe

import (
	"context"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// NET-01: network mode none.
func net01(ctx context.Context, c *Config, r *recorder) {
	ifs, err := net.Interfaces()
	if err != nil {
		r.add("list interfaces", err, "")
	} else {
		var names []string
		out := false
		for _, i := range ifs {
			names = append(names, i.Name)
			if i.Flags&net.FlagLoopback == 0 {
				out = true
			}
		}
		if out {
			r.allowed("list interfaces", list(names, 20))
		} else {
			r.denied("list interfaces", "", "loopback only: "+list(names, 20))
		}
	}
	r.add("connect 1.1.1.1:53", dialTCP(ctx, c, "1.1.1.1", 53), "")
	r.add("connect [2606:4700:4700::1111]:53", dialTCP(ctx, c, "2606:4700:4700::1111", 53), "")
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, "example.com")
	r.add("resolve example.com", err, strings.Join(addrs, ","))
}

// NET-04: the daemon's port on every loopback spelling, and the host's
// own address.
func net04(ctx context.Context, c *Config, r *recorder) {
	if c.DaemonPort == 0 {
		r.errorf("connect <loopback>:<daemon port>", "no --daemon-port given")
		return
	}
	for _, host := range []string{"127.0.0.1", "127.1.2.3", "::1", "localhost", "0.0.0.0"} {
		r.add("connect "+host+":<daemon port>", dialTCP(ctx, c, host, c.DaemonPort), "")
	}
	if c.HostIP == "" {
		r.errorf("connect <host ip>:<daemon port>", "no --host-ip given")
		return
	}
	r.add("connect <host ip>:<daemon port>", dialTCP(ctx, c, c.HostIP, c.DaemonPort), c.HostIP)
}

// NET-17: another sandbox's listener on its own 127.0.0.1.
func net17(ctx context.Context, c *Config, r *recorder) {
	if c.PeerPort == 0 {
		r.errorf("connect 127.0.0.1:<peer port>", "no --peer-port given")
		return
	}
	r.add("connect 127.0.0.1:<peer port>", dialTCP(ctx, c, "127.0.0.1", c.PeerPort), strconv.Itoa(c.PeerPort))
}

// dialTCP connects to host:port within c.Timeout and hangs up.
func dialTCP(ctx context.Context, c *Config, host string, port int) error {
	d := net.Dialer{Timeout: c.Timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err == nil {
		conn.Close()
	}
	return err
}

// findSockets lists the unix sockets under roots, at most depth levels
// down and looking at no more than max entries in all.
func findSockets(roots []string, depth, max int) []string {
	var out []string
	seen := map[string]bool{}
	n := 0
	for _, root := range roots {
		root, err := filepath.EvalSymlinks(root)
		if err != nil || seen[root] {
			continue
		}
		seen[root] = true
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if n++; n > max {
				return filepath.SkipAll
			}
			if d.IsDir() && strings.Count(strings.TrimPrefix(p, root), "/") >= depth {
				return filepath.SkipDir
			}
			if d.Type()&fs.ModeSocket != 0 {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// globFirst returns the first path matching one of patterns, or the
// first pattern with its ranges taken as their first letter (a path that
// is not there).
func globFirst(patterns ...string) string {
	for _, p := range patterns {
		if m, _ := filepath.Glob(p); len(m) > 0 {
			return m[0]
		}
	}
	return strings.ReplaceAll(patterns[0], "[a-z]", "a")
}
