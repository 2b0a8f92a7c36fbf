package sandbox

import (
	"maps"
	"slices"
	"testing"
)

// TestAddStatusIDs: every uid and gid of a status file's Uid and Gid lines
// (real, effective, saved, file system) is read, and nothing else.
func TestAddStatusIDs(t *testing.T) {
	t.Parallel()
	status := []byte("Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nPid:\t42\nPPid:\t1\nTracerPid:\t0\n" +
		"Uid:\t300001\t0\t300002\t300003\nGid:\t300004\t300005\t0\t300006\nFdSize:\t64\nGroups:\t77 \nNgid:\t0\n")
	got := map[int]bool{}
	addStatusIDs(got, status, "\nUid:")
	addStatusIDs(got, status, "\nGid:")
	want := []int{0, 300001, 300002, 300003, 300004, 300005, 300006}
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, want) {
		t.Errorf("ids of the status = %v, want %v", ids, want)
	}
	// The last line of a file cut short still counts.
	got = map[int]bool{}
	addStatusIDs(got, []byte("Pid:\t1\nUid:\t5\t6\t7\t8"), "\nUid:")
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, []int{5, 6, 7, 8}) {
		t.Errorf("ids of a cut status = %v, want [5 6 7 8]", ids)
	}
}

// BenchmarkProcessUIDs measures one scan of every process's credentials,
// as Lease makes.
func BenchmarkProcessUIDs(b *testing.B) {
	for b.Loop() {
		if _, err := processUIDs(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProcessesAs measures one pass over every process's owner, as
// Release makes.
func BenchmarkProcessesAs(b *testing.B) {
	for b.Loop() {
		if _, err := processesAs(firstSandboxUID); err != nil {
			b.Fatal(err)
		}
	}
}
