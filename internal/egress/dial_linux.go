package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nsDialer dials from the daemon's network namespace or, when ns is set,
// from that one. A socket belongs to the namespace of the thread that made
// it, so one OS thread stays in ns and makes the sockets; connecting and
// everything after happen on any thread, as for any socket.
type nsDialer struct {
	d      net.Dialer
	ns     string
	req    chan socketReq // to the thread in ns; nil without ns
	done   chan struct{}  // closed by Close: the thread ends
	exited chan struct{}  // closed by the thread when it has left ns
}

type socketReq struct {
	family, typ int
	reply       chan socketReply
}

type socketReply struct {
	fd  int
	err error
}

func newDialer(ns string) (*nsDialer, error) {
	d := &nsDialer{ns: ns}
	d.d.KeepAliveConfig = net.KeepAliveConfig{Enable: true}
	if ns == "" {
		return d, nil
	}
	d.req, d.done, d.exited = make(chan socketReq), make(chan struct{}), make(chan struct{})
	ready := make(chan error, 1)
	go d.socketThread(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// socketThread makes sockets in ns until the dialer is closed, on a thread
// of its own (InNetNS's, put back in the daemon's namespace at the end).
func (d *nsDialer) socketThread(ready chan<- error) {
	defer close(d.exited)
	joined := false
	err := InNetNS(d.ns, func() error {
		joined = true
		ready <- nil
		for {
			select {
			case r := <-d.req:
				fd, err := unix.Socket(r.family, r.typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
				r.reply <- socketReply{fd, err}
			case <-d.done:
				return nil
			}
		}
	})
	if !joined {
		ready <- err
	}
}

// DialContext connects to addr, an IP address and port.
func (d *nsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.ns == "" {
		return d.d.DialContext(ctx, network, addr)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: the egress namespace dials addresses only", addr)
	}
	family, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()})
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	typ := unix.SOCK_STREAM
	if strings.HasPrefix(network, "udp") {
		typ = unix.SOCK_DGRAM
	}
	reply := make(chan socketReply, 1)
	select {
	case d.req <- socketReq{family, typ, reply}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.done:
		return nil, net.ErrClosed
	}
	r := <-reply
	if r.err != nil {
		return nil, fmt.Errorf("making a socket in the egress namespace: %w", r.err)
	}
	inProgress := false
	if err := unix.Connect(r.fd, sa); errors.Is(err, unix.EINPROGRESS) {
		inProgress = true
	} else if err != nil {
		unix.Close(r.fd)
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.UDPAddrFromAddrPort(ap), Err: os.NewSyscallError("connect", err)}
	}
	f := os.NewFile(uintptr(r.fd), "egress")
	c, err := net.FileConn(f) // a duplicate, on Go's poller
	f.Close()
	if err != nil {
		return nil, err
	}
	if !inProgress {
		return c, nil
	}
	// Wait until the socket is writable: connected, or failed.
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	// Each call checks the socket (the poller's readiness from before
	// the wait began is not kept): failed, connected, or still going.
	var soErr error
	werr := rc.Write(func(fd uintptr) bool {
		n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			soErr = err
		case n != 0:
			soErr = unix.Errno(n)
		default:
			_, err := unix.Getpeername(int(fd))
			return err == nil
		}
		return true
	})
	if werr == nil {
		werr = soErr
	}
	if werr != nil {
		c.Close()
		if ctx.Err() != nil {
			werr = ctx.Err()
		}
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: werr}
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// Close ends the thread in ns and waits until it has left it.
func (d *nsDialer) Close() {
	if d.req != nil {
		close(d.done)
		<-d.exited
	}
}
