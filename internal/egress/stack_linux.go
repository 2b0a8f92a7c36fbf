package egress

import (
	"fmt"
	"net/netip"
	"os"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

const nicID tcpip.NICID = 1

// gatewayMAC is the link address of Berth's end ("\x02berth": locally
// administered).
var gatewayMAC = tcpip.LinkAddress("\x02berth")

// newStack makes the user-space TCP/IP stack that is the sandbox's only
// peer: IPv4 only (the sandbox has no IPv6), answering ARP for the
// gateway, accepting packets to every address (promiscuous) and answering
// from them (spoofing), so that each TCP connection the sandbox opens
// reaches accept, whatever address it dialed. onTCP decides each one;
// dns answers on the gateway's port 53. No UDP but that, no ICMP echo to
// anything but the gateway, nothing else.
func newStack(tap *os.File, onTCP func(*tcp.ForwarderRequest)) (*stack.Stack, *gonet.UDPConn, error) {
	ep, err := fdbased.New(&fdbased.Options{
		FDs:                []int{int(tap.Fd())},
		MTU:                linkMTU,
		EthernetHeader:     true,
		Address:            gatewayMAC,
		RXChecksumOffload:  true,
		PacketDispatchMode: fdbased.Readv,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("serving the sandbox's TAP device: %w", err)
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	fail := func(format string, err tcpip.Error) (*stack.Stack, *gonet.UDPConn, error) {
		s.Close()
		s.Wait()
		return nil, nil, fmt.Errorf(format, err)
	}
	sack := tcpip.TCPSACKEnabled(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)
	// Buffers large enough to keep a fast upstream busy, and bounded:
	// they are the daemon's memory, not the sandbox's, so a sandbox that
	// fills all its connections holds at most maxConns x (rcv + snd).
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: 1 << 20, Max: bufferMax}
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: 1 << 20, Max: bufferMax}
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	if err := s.CreateNICWithOptions(nicID, ep, stack.NICOptions{Name: "sandbox"}); err != nil {
		return fail("making the stack's interface: %v", err)
	}
	if err := s.SetPromiscuousMode(nicID, true); err != nil {
		return fail("accepting every destination: %v", err)
	}
	if err := s.SetSpoofing(nicID, true); err != nil {
		return fail("answering from every destination: %v", err)
	}
	gw := tcpip.AddrFrom4(netip.MustParseAddr(gatewayAddr.String()).As4())
	if err := s.AddProtocolAddress(nicID, tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: gw, PrefixLen: 30},
	}, stack.AddressProperties{}); err != nil {
		return fail("addressing the gateway: %v", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nicID}})
	fwd := tcp.NewForwarder(s, 0, maxHandshakes, onTCP)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	var wq waiter.Queue
	dep, terr := s.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
	if terr != nil {
		return fail("making the resolver's socket: %v", terr)
	}
	if terr := dep.Bind(tcpip.FullAddress{NIC: nicID, Addr: gw, Port: 53}); terr != nil {
		dep.Close()
		return fail("binding the resolver: %v", terr)
	}
	return s, gonet.NewUDPConn(&wq, dep), nil
}

// maxHandshakes bounds the connections a sandbox may have half open.
const maxHandshakes = 256

// bufferMax bounds each direction's buffer of one connection in the
// stack.
const bufferMax = 4 << 20
