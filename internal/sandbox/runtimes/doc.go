// Package runtimes holds the runtimes that start and stop a sandbox's
// agent, behind sandbox.Runtime: process (the agent as a host process, no
// isolation), container (an OCI container under crun or runc) and gvisor
// (runsc). With them are what the isolated runtimes build on: the OCI
// spec, cgroups, the seccomp profile, the host template and the root's
// overlay, and the workspace disk image. Package sandbox does not import
// this one; the daemon hands the runtimes to sandbox.NewManager.
package runtimes

// OCIConfig configures the isolated runtimes.
type OCIConfig struct {
	DataDir string
	// OCIRuntime picks the program of the container runtime: "crun",
	// "runc", or "auto" (crun when installed, else runc). On hybrid cgroup
	// hosts crun runs in a private mount namespace without the v2 tree.
	OCIRuntime string
	// Runsc is the gVisor runsc binary ("" finds it on PATH).
	Runsc string
}
