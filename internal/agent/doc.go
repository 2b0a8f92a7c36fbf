// Package agent is what runs inside every sandbox, and the daemon's side of
// talking to it.
//
// The agent (Agent, started by `berth agent`) is the sandbox's first
// process: it runs commands with retained, offset-addressed output,
// terminals on PTYs, supervised services, a file API confined to the
// workspace, and a proxy to ports on the sandbox's loopback. It serves an
// HTTP API on a unix socket the daemon made and handed it, and answers
// only the sandbox's token.
//
// Client is the only way the daemon speaks that API: typed calls for
// commands, services, files and terminals, Proxy for the routes the daemon
// forwards as they are, and Port for requests to an app inside. Nothing
// outside this package builds an agent URL or holds its token.
package agent
