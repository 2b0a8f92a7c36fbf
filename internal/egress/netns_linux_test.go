package egress

import (
	"os"
	"path/filepath"
	"testing"
)

// threadNamespaces returns the network namespaces of this process's
// threads, with how many threads are in each.
func threadNamespaces(t *testing.T) map[string]int {
	t.Helper()
	paths, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range paths {
		if l, err := os.Readlink(p); err == nil {
			out[l]++
		}
	}
	return out
}

// TestNetNSLeavesNoThreadBehind: making, adopting and dialing from
// namespaces leaves every thread of the daemon in its own namespace (a
// thread left elsewhere would make later sockets there), and removing the
// namespace leaves no pin.
func TestNetNSLeavesNoThreadBehind(t *testing.T) {
	if os.Geteuid() != 0 {
		// testenv.NeedRoot, which this package cannot import (testenv
		// imports the daemon, which imports egress).
		if os.Getenv("CI") == "true" {
			t.Fatal("prerequisite missing under CI: needs root")
		}
		t.Skip("prerequisite missing: needs root")
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	pin := filepath.Join(t.TempDir(), "netns")
	for range 20 {
		tap, err := makeNetNS(pin)
		if err != nil {
			t.Fatal(err)
		}
		tap.Close()
		if !isNetNS(pin) {
			t.Fatal("the namespace is not pinned")
		}
		tap, err = adoptNetNS(pin)
		if err != nil {
			t.Fatalf("adopting the namespace's device: %v", err)
		}
		tap.Close()
		d, err := newDialer(pin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.DialContext(t.Context(), "tcp", "127.0.0.1:1"); err == nil {
			t.Error("dialed a port nothing listens on in an empty namespace")
		}
		d.Close()
		if err := removeNetNS(pin); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(pin); !os.IsNotExist(err) {
			t.Fatalf("the pin is left: %v", err)
		}
	}
	for ns, n := range threadNamespaces(t) {
		if ns != self {
			t.Errorf("%d threads are left in %s", n, ns)
		}
	}
	if err := removeNetNS(pin); err != nil {
		t.Errorf("removing a removed namespace: %v", err)
	}
}
