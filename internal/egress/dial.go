package egress

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// nsDialer dials from the daemon's network namespace or, when ns is set,
// from that one (a socket belongs to the namespace of the thread that
// made it).
type nsDialer struct {
	d      net.Dialer
	ns     string
	nsFD   int // the dialing namespace, open
	selfFD int // the daemon's own namespace, open
}

func newDialer(ns string) (*nsDialer, error) {
	d := &nsDialer{ns: ns, nsFD: -1, selfFD: -1}
	d.d.KeepAliveConfig = net.KeepAliveConfig{Enable: true}
	if ns == "" {
		return d, nil
	}
	var err error
	if d.nsFD, err = unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("opening the egress namespace %s: %w", ns, err)
	}
	if d.selfFD, err = unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		unix.Close(d.nsFD)
		return nil, fmt.Errorf("opening the daemon's network namespace: %w", err)
	}
	return d, nil
}

func (d *nsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.ns == "" {
		return d.d.DialContext(ctx, network, addr)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(d.nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // unchanged
			ch <- result{nil, fmt.Errorf("joining the egress namespace: %w", err)}
			return
		}
		c, err := d.d.DialContext(ctx, network, addr)
		// Back in the daemon's namespace, or never given back to Go (see
		// inNetNS).
		if unix.Setns(d.selfFD, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (d *nsDialer) Close() {
	if d.nsFD >= 0 {
		unix.Close(d.nsFD)
		unix.Close(d.selfFD)
	}
}
