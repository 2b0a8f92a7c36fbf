package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
)

// TestClusterJobFields: what a cluster's jobs add to a job's record. The
// worker running an attempt is recorded and cleared; a job left to the
// first queue job (ResetRiver) takes a queue job's ID only while none has
// claimed it (Unclaimed); the fence of the old queue job keeps refusing.
func TestClusterJobFields(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		j := newJob(t, db, "job_w", "ten_a", "key_1", "", time.Now().UTC())
		w1, none, attempt := "w1", "", 1
		got, err := db.ChangeJob(ctx, j.ID, jobs.Change{From: []string{apitype.JobQueued}, RiverID: 5, NewRiver: 5,
			To: apitype.JobRunning, Attempt: &attempt, Worker: &w1})
		if err != nil || got.Worker != "w1" || got.RiverID != 5 {
			t.Fatalf("ChangeJob(running on w1) = %+v, %v", got, err)
		}
		if got, err = db.GetJob(ctx, j.ID); err != nil || got.Worker != "w1" {
			t.Fatalf("GetJob after it ran on w1 = %+v, %v", got, err)
		}
		// HQ requeues it: queue job 5 no longer owns it.
		if got, err = db.ChangeJob(ctx, j.ID, jobs.Change{From: []string{apitype.JobRunning}, RiverID: 5,
			To: apitype.JobQueued, ResetRiver: true, Worker: &none}); err != nil || got.RiverID != 0 || got.Worker != "" {
			t.Fatalf("ChangeJob(requeue) = %+v, %v; want river_id 0, no worker", got, err)
		}
		if got, err = db.ChangeJob(ctx, j.ID, jobs.Change{From: []string{apitype.JobQueued}, Unclaimed: true, NewRiver: 9}); err != nil || got.RiverID != 9 {
			t.Fatalf("ChangeJob(record queue job 9, unclaimed) = %+v, %v", got, err)
		}
		// Claimed now: another recording is refused, and so is the old
		// queue job's end (positive control: queue job 9's own change).
		if _, err := db.ChangeJob(ctx, j.ID, jobs.Change{From: []string{apitype.JobQueued}, Unclaimed: true, NewRiver: 10}); !errcode.Has(err, errcode.JobState) {
			t.Errorf("ChangeJob(unclaimed) of a claimed job = %v, want job_state", err)
		}
		if _, err := db.ChangeJob(ctx, j.ID, jobs.Change{RiverID: 5, To: apitype.JobSucceeded}); !errcode.Has(err, errcode.JobState) {
			t.Errorf("the old queue job's end = %v, want job_state", err)
		}
		if _, err := db.ChangeJob(ctx, j.ID, jobs.Change{RiverID: 9, To: apitype.JobStarting}); err != nil {
			t.Errorf("queue job 9's own change: %v", err)
		}
	})
}

// TestBlobContents: a file's content in the database, in chunks: read
// back whole (empty, one chunk, several), stored once, missing as
// FileNotFound, and deleted with the blob's record.
func TestBlobContents(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		big := make([]byte, 2<<20+12345)
		_, _ = rand.Read(big)
		for name, content := range map[string][]byte{"empty": {}, "small": []byte("hello"), "chunks": big} {
			sum := sha256.Sum256(content)
			sha := hex.EncodeToString(sum[:])
			for range 2 { // the second put keeps what is there
				if err := db.PutBlobContent(ctx, sha, bytes.NewReader(content)); err != nil {
					t.Fatalf("%s: PutBlobContent: %v", name, err)
				}
			}
			rc, err := db.OpenBlobContent(ctx, sha)
			if err != nil {
				t.Fatalf("%s: OpenBlobContent: %v", name, err)
			}
			back, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(back, content) {
				t.Errorf("%s: read back %d bytes (%v), want %d equal", name, len(back), err, len(content))
			}
			if err := db.PutBlob(ctx, jobs.Blob{SHA256: sha, Size: int64(len(content)), CreatedAt: time.Now().UTC()}); err != nil {
				t.Fatal(err)
			}
			if err := db.DeleteBlob(ctx, sha); err != nil {
				t.Fatal(err)
			}
			if _, err := db.OpenBlobContent(ctx, sha); !errcode.Has(err, errcode.FileNotFound) {
				t.Errorf("%s: OpenBlobContent after DeleteBlob = %v, want file_not_found", name, err)
			}
		}
	})
}
