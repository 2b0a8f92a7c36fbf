package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/link/tun"
)

// The sandbox's side of its link. Every egress sandbox has the same
// addresses: each has a namespace and a stack of its own, so they never
// meet (NET-17).
var (
	sandboxAddr = net.IPv4(172, 31, 255, 2)
	gatewayAddr = net.IPv4(172, 31, 255, 1) // Berth's stack: the route and the resolver
	linkMask    = net.CIDRMask(30, 32)
)

// linkName is the sandbox's one interface besides loopback.
const linkName = "eth0"

// linkMTU is large so that a bulk transfer crosses the device (and the
// user-space stack) in few packets.
const linkMTU = 65520

// InNetNS runs fn on an OS thread locked to it that has joined the
// network namespace pinned at path (or, with path "", a new one), then
// puts the thread back in the daemon's namespace. A thread that cannot be
// put back is never given back to Go: it ends with fn's goroutine. (Ending
// is not enough on its own: a locked goroutine that ends on the process's
// main thread leaves that thread parked, and a thread Go later clones from
// it would start in the namespace it was left in.)
func InNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("opening the daemon's network namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if path == "" {
			err = unix.Unshare(unix.CLONE_NEWNET)
		} else {
			var fd int
			if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				err = unix.Setns(fd, unix.CLONE_NEWNET)
				unix.Close(fd)
			}
		}
		if err != nil {
			if unix.Setns(self, unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			errc <- fmt.Errorf("entering network namespace %q: %w", path, err)
			return
		}
		err = fn()
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// makeNetNS makes a network namespace, pins it at pin (a bind mount that
// keeps it when no process is in it), and gives it its link: a persistent
// TAP device whose other end is the returned file, the address, the route
// through Berth, loopback, and no IPv6. On error nothing is left.
func makeNetNS(pin string) (tap *os.File, err error) {
	f, err := os.OpenFile(pin, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("making the network namespace's pin: %w", err)
	}
	f.Close()
	defer func() {
		if err != nil {
			_ = unix.Unmount(pin, unix.MNT_DETACH)
			os.Remove(pin)
		}
	}()
	err = InNetNS("", func() error {
		if err := unix.Mount("/proc/thread-self/ns/net", pin, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pinning the network namespace: %w", err)
		}
		// No IPv6 at all: nothing to route around v4 rules with (NET-16).
		for _, p := range []string{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"} {
			if err := os.WriteFile(p, []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("disabling IPv6: %w", err)
			}
		}
		var err error
		if tap, err = openTAP(true); err != nil {
			return err
		}
		if err := configureLink(); err != nil {
			tap.Close()
			tap = nil
			return err
		}
		return nil
	})
	return tap, err
}

// adoptNetNS opens the TAP device of a namespace made earlier (by a
// daemon that has since stopped).
func adoptNetNS(pin string) (tap *os.File, err error) {
	err = InNetNS(pin, func() error {
		tap, err = openTAP(false)
		return err
	})
	return tap, err
}

// openTAP opens (making, when create) the namespace's persistent TAP
// device. It stays when the daemon's end closes, so a restarted daemon
// can serve it again.
func openTAP(create bool) (*os.File, error) {
	if !create {
		if _, err := net.InterfaceByName(linkName); err != nil {
			return nil, fmt.Errorf("the sandbox's network link is gone: %w", err)
		}
	}
	fd, err := tun.OpenTAP(linkName)
	if err != nil {
		return nil, fmt.Errorf("opening the sandbox's TAP device: %w", err)
	}
	if create {
		if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("making the TAP device persistent: %w", err)
		}
	}
	return os.NewFile(uintptr(fd), "tap"), nil
}

// configureLink brings up loopback and the link, with the sandbox's
// address and a default route through Berth's stack.
func configureLink() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding loopback: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing up loopback: %w", err)
	}
	link, err := netlink.LinkByName(linkName)
	if err != nil {
		return fmt.Errorf("finding the sandbox's link: %w", err)
	}
	if err := netlink.LinkSetMTU(link, linkMTU); err != nil {
		return fmt.Errorf("setting the link's MTU: %w", err)
	}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: sandboxAddr, Mask: linkMask}}); err != nil {
		return fmt.Errorf("addressing the sandbox's link: %w", err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing up the sandbox's link: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gatewayAddr}); err != nil {
		return fmt.Errorf("routing through Berth: %w", err)
	}
	return nil
}

// removeNetNS unpins the namespace; it (and its device) goes once the
// sandbox's processes are gone too.
func removeNetNS(pin string) error {
	if err := unix.Unmount(pin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpinning the network namespace: %w", err)
	}
	if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
