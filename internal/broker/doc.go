// Package broker lets a Berth sandbox use a credential without ever holding
// it.
//
// A sandbox reaches the internet only through the daemon's egress proxy. For
// a host with a bound secret the proxy hands the sandbox's TCP connection to
// a [Forwarder], which terminates the sandbox's TLS with a certificate from
// that sandbox's own [CA] (a CA only that sandbox trusts), verifies the real
// server against the host's roots, sets the secret header on every request
// and streams the responses back. The sandbox sees a placeholder credential
// at most; the real value exists only in the daemon.
//
// Secrets and CA keys are stored sealed by a [Sealer], whose key lives in a
// file beside the database, so a copy of the database alone reveals nothing.
//
// What the package does not protect against: an upstream that echoes the
// credential back in a response (for example a "show my request headers"
// endpoint, or an error message quoting the key) reveals it to the sandbox,
// because responses are passed through unmodified. Binding a secret to a
// host trusts that host not to reflect it; TRACE, the standard way to make a
// server reflect a request, is refused.
package broker
