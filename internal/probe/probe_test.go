package probe

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelect(t *testing.T) {
	if len(Probes()) == 0 {
		t.Skip("no probes off Linux")
	}
	all, err := Select([]string{"all"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Heavy {
			t.Errorf("Select(all) includes heavy probe %s", p.ID)
		}
	}
	if len(all) == 0 || len(all) >= len(Probes()) {
		t.Errorf("Select(all) = %d probes of %d, want all but the heavy ones", len(all), len(Probes()))
	}
	got, err := Select([]string{"res-01", "ESC-02", "RES-01"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	if !slices.Equal(ids, []string{"RES-01", "ESC-02"}) {
		t.Errorf("Select(res-01, ESC-02, RES-01) = %v, want [RES-01 ESC-02]", ids)
	}
	if _, err := Select([]string{"ESC-99"}); err == nil {
		t.Error("Select(ESC-99) succeeded, want an error")
	}
}

func TestRecorder(t *testing.T) {
	pathErr := &os.PathError{Op: "open", Path: "/x", Err: syscall.EPERM}
	dialErr := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name   string
		err    error
		detail string
		want   Result
	}{
		{"nil", nil, "d", Result{ID: "T", Attempt: "a", Result: Allowed, Detail: "d"}},
		{"errno", syscall.EINVAL, "", Result{ID: "T", Attempt: "a", Result: Denied, Errno: "EINVAL", Detail: "invalid argument"}},
		{"wrapped errno keeps detail", pathErr, "d", Result{ID: "T", Attempt: "a", Result: Denied, Errno: "EPERM", Detail: "d"}},
		{"net", dialErr, "", Result{ID: "T", Attempt: "a", Result: Denied, Errno: "ECONNREFUSED", Detail: dialErr.Error()}},
		{"no errno", errors.New("boom"), "d", Result{ID: "T", Attempt: "a", Result: Denied, Detail: "d; boom"}},
		{"timeout", fmt.Errorf("x: %w", os.ErrDeadlineExceeded), "", Result{ID: "T", Attempt: "a", Result: Denied, Errno: "ETIMEDOUT", Detail: "x: i/o timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Result
			r := &recorder{id: "T", emit: func(res Result) { got = res }}
			r.add("a", tt.err, tt.detail)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("add(%v, %q) (-want +got):\n%s", tt.err, tt.detail, diff)
			}
		})
	}
}

func TestParseAndOutcome(t *testing.T) {
	out := "noise\n{\"id\":\"ESC-04\",\"attempt\":\"mount\",\"result\":\"denied\",\"errno\":\"EPERM\"}\n{not json}\n" +
		"{\"id\":\"ESC-04\",\"attempt\":\"chroot\",\"result\":\"allowed\"}\n{\"id\":\"X\",\"attempt\":\"y\",\"result\":\"denied\"}\n"
	var got []string
	for _, r := range Parse(out) {
		got = append(got, r.Attempt+"="+r.Outcome())
	}
	if want := []string{"mount=EPERM", "chroot=allowed", "y=denied"}; !slices.Equal(got, want) {
		t.Errorf("Parse outcomes = %v, want %v", got, want)
	}
}
