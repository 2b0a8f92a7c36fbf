package runner

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/testenv"
)

// TestHealthWait: GET /healthz?wait=MS on a runner still starting answers
// once Start has ended, not before: the daemon asks once instead of
// polling. The control: without wait (or with a short one) the same
// runner answers 503 starting at once.
func TestHealthWait(t *testing.T) {
	testenv.NeedCommand(t, "qpdf")
	testenv.NeedCommand(t, "exiftool")
	r, err := New(Config{Profile: jobspec.ProfilePDF, InputDir: t.TempDir(), OutputDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	get := func(q string) int {
		resp, err := http.Get(srv.URL + "/healthz" + q)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(""); s != http.StatusServiceUnavailable {
		t.Fatalf("health before Start = %d, want 503", s)
	}
	if s := get("?wait=20"); s != http.StatusServiceUnavailable {
		t.Fatalf("health?wait=20 before Start = %d, want 503 after the wait", s)
	}
	waited := make(chan int, 1)
	go func() { waited <- get("?wait=30000") }()
	// The request is (almost always) in flight before Start; if the wait
	// did not hold it, it would have answered 503 meanwhile.
	time.Sleep(200 * time.Millisecond)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	if s := <-waited; s != http.StatusOK {
		t.Errorf("health?wait=30000 across Start = %d, want 200", s)
	}
}
