// Package netpolicy is the egress policy of a Berth sandbox: its wire type,
// its validation, and the decision Berth takes on each outbound connection.
//
// A sandbox in network mode "egress" reaches the internet only through
// Berth, which decides each outbound TCP connection on the IP address it
// dials, the port, and the domain names known for the connection (from TLS
// SNI, the HTTP Host header, and the names Berth's DNS answered with that
// address). This package holds only that logic; it does no I/O.
//
// # Entries
//
// Allow, Deny and AllowOnly list destinations, each with an optional port:
//
//	example.com          the name itself (case-insensitive; a trailing dot is dropped)
//	*.example.com        any name strictly below example.com, at any depth
//	1.2.3.4, 2001:db8::1 one address
//	10.0.0.0/8           a CIDR prefix (host bits must be zero)
//	example.com:22       any of the above with a port: *.example.com:8080,
//	                     1.2.3.4:22, 10.0.0.0/8:22, [2001:db8::1]:22,
//	                     [2001:db8::/32]:22
//
// Domain names are ASCII (internationalized names in their xn-- form).
// IPv4-mapped IPv6 entries (::ffff:1.2.3.4) are stored as IPv4; an IPv6
// prefix never matches an IPv4 address.
//
// # Decision order
//
// Decide takes these steps in order; the first that refuses decides:
//
//  0. A policy whose mode is not "egress" reaches nothing (not_allowed).
//  1. Hard limits. The address is unmapped (::ffff:a.b.c.d is a.b.c.d) and
//     its zone dropped. If it, or the IPv4 address embedded in a NAT64
//     (64:ff9b::/96) or 6to4 (2002::/16) address, is in Limits.Blocked, the
//     connection is refused as host_address. Otherwise, unless the address
//     is in Limits.Public, a special-purpose address (see SpecialPurpose)
//     is refused as special_purpose. No rule of a sandbox overrides either.
//  2. Deny rules, the policy's and the daemon's (Limits.Deny): a domain
//     entry matches when any known name matches it (names from DNS
//     included), an address or prefix entry when the address or its
//     embedded IPv4 address is in it, and an entry with a port only on that
//     port. A match is denied_by_rule; deny always wins over any allow.
//  3. The port baseline: the policy's Ports, else Limits.DefaultPorts, else
//     80 and 443. A port outside 1-65535, or outside a non-empty
//     Limits.PortLimit, is refused as port_blocked whatever the rules say.
//  4. The daemon's allowlist (Limits.AllowOnly), when non-empty: one of its
//     entries must match the destination, on its own port if it has one,
//     else on a baseline port. Otherwise not_allowed. A sandbox's rules
//     cannot widen this list.
//  5. The sandbox's allowlist (Policy.AllowOnly), when non-empty: the same,
//     with the policy's Allow entries counted as allowlist entries too, so
//     allow_only [a.com] with allow [github.com:22] reaches a.com on the
//     baseline ports and github.com on 22. Otherwise not_allowed.
//  6. With neither allowlist, a baseline port is allowed to any destination,
//     and another port only where an Allow entry with that port matches the
//     destination. Otherwise port_blocked.
//
// For a domain entry to allow a connection it is enough that one of the
// names matches; the caller guarantees the names are bound to the address
// (Berth's DNS answered them with it, or Berth resolved them itself).
package netpolicy
