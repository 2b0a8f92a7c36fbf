package broker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealerRoundTrip(t *testing.T) {
	t.Parallel()
	s := openTestSealer(t)
	for _, plaintext := range []string{"", "sk-live-1234", strings.Repeat("x", 1<<16)} {
		sealed, err := s.Seal([]byte(plaintext), "sbx_a")
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if len(plaintext) > 0 && bytes.Contains(sealed, []byte(plaintext)) {
			t.Errorf("sealed value contains the plaintext")
		}
		got, err := s.Open(sealed, "sbx_a")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if string(got) != plaintext {
			t.Errorf("Open(Seal(%.10q)) = %.10q, want the plaintext", plaintext, got)
		}
	}
}

func TestSealerNonceIsRandom(t *testing.T) {
	t.Parallel()
	s := openTestSealer(t)
	a, _ := s.Seal([]byte("same"), "sbx_a")
	b, _ := s.Seal([]byte("same"), "sbx_a")
	if bytes.Equal(a, b) {
		t.Errorf("two seals of one plaintext are equal, want different nonces")
	}
	if got, want := len(a), 12+len("same")+16; got != want {
		t.Errorf("len(sealed) = %d, want %d (nonce, ciphertext, tag)", got, want)
	}
}

func TestSealerOpenRejects(t *testing.T) {
	t.Parallel()
	s := openTestSealer(t)
	sealed, err := s.Seal([]byte("sk-live-1234"), "sbx_a")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 1
		return b
	}
	tests := []struct {
		name    string
		sealed  []byte
		context string
		wantErr bool
	}{
		{"positive control", sealed, "sbx_a", false},
		{"other context", sealed, "sbx_b", true},
		{"empty context", sealed, "", true},
		{"tampered nonce", flip(0), "sbx_a", true},
		{"tampered ciphertext", flip(12), "sbx_a", true},
		{"tampered tag", flip(len(sealed) - 1), "sbx_a", true},
		{"truncated", sealed[:len(sealed)-1], "sbx_a", true},
		{"short", sealed[:5], "sbx_a", true},
		{"empty", nil, "sbx_a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Open(tt.sealed, tt.context)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Open() error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "sk-live") {
				t.Errorf("Open() error = %q, contains the plaintext", err)
			}
			if err == nil && string(got) != "sk-live-1234" {
				t.Errorf("Open() = %q, want the plaintext", got)
			}
		})
	}
}

func TestSealerOtherKeyFails(t *testing.T) {
	t.Parallel()
	a, b := openTestSealer(t), openTestSealer(t)
	sealed, _ := a.Seal([]byte("secret"), "sbx_a")
	if _, err := b.Open(sealed, "sbx_a"); err == nil {
		t.Errorf("Open with another key succeeded, want error")
	}
}

func TestOpenSealerCreatesKeyOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "seal.key")
	s1, err := OpenSealer(path)
	if err != nil {
		t.Fatalf("OpenSealer (create): %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %#o, want 0600", got)
	}
	if fi.Size() != 32 {
		t.Errorf("key file size = %d, want 32", fi.Size())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the key file", len(entries))
	}
	key1, _ := os.ReadFile(path)

	s2, err := OpenSealer(path)
	if err != nil {
		t.Fatalf("OpenSealer (reuse): %v", err)
	}
	if key2, _ := os.ReadFile(path); !bytes.Equal(key1, key2) {
		t.Errorf("second OpenSealer changed the key file")
	}
	sealed, _ := s1.Seal([]byte("secret"), "sbx_a")
	if got, err := s2.Open(sealed, "sbx_a"); err != nil || string(got) != "secret" {
		t.Errorf("reopened sealer Open() = %q, %v; want the plaintext", got, err)
	}
}

func TestOpenSealerRejectsBadKeyFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		size    int
		mode    os.FileMode
		wantErr bool
	}{
		{"positive control", 32, 0o600, false},
		{"read only", 32, 0o400, false},
		{"group readable", 32, 0o640, true},
		{"world readable", 32, 0o644, true},
		{"short", 16, 0o600, true},
		{"long", 33, 0o600, true},
		{"empty", 0, 0o600, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "seal.key")
			if err := os.WriteFile(path, make([]byte, tt.size), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := OpenSealer(path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("OpenSealer() error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("OpenSealer() error = %q, want it to name %s", err, path)
			}
		})
	}
}

func TestOpenSealerRejectsDirectory(t *testing.T) {
	t.Parallel()
	path := t.TempDir()
	if _, err := OpenSealer(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("OpenSealer(directory) error = %v, want one naming %s", err, path)
	}
}

func FuzzSealerOpen(f *testing.F) {
	s, err := OpenSealer(filepath.Join(f.TempDir(), "seal.key"))
	if err != nil {
		f.Fatal(err)
	}
	sealed, _ := s.Seal([]byte("secret"), "sbx_a")
	f.Add(sealed, "sbx_a")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, b []byte, context string) {
		got, err := s.Open(b, context)
		if err == nil && !(bytes.Equal(b, sealed) && context == "sbx_a" && string(got) == "secret") {
			t.Errorf("Open(%x, %q) = %q, want an error for a value not made by Seal", b, context, got)
		}
	})
}

func openTestSealer(t *testing.T) *Sealer {
	t.Helper()
	s, err := OpenSealer(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatalf("OpenSealer: %v", err)
	}
	return s
}
