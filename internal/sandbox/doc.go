// Package sandbox manages sandboxes: their records, their lifecycle,
// templates, warm pools and services' intents.
//
// A Manager owns every sandbox of a daemon. Each live sandbox runs a berth
// agent (package agent) that executes commands and serves files inside it;
// the Manager starts the agent through a Runtime and talks to it over a
// per-sandbox unix socket with a per-sandbox token. Runtimes differ only in
// how the agent is started and contained: "process" runs it as a host
// process group (trusted code only), "container" and "gvisor" in an OCI
// container under crun or runc, or runsc. They live in package runtimes,
// which imports this one: the daemon hands them to NewManager.
//
// Durability: every state change is committed to the Store before the
// Manager returns. Agents outlive the daemon; on start the Manager
// re-adopts every sandbox the Store says is live and marks the ones whose
// agent is gone as failed (reason "agent_lost") and their running commands
// as interrupted.
package sandbox
