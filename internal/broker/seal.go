package broker

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// sealKeySize is the size of a sealing key: AES-256.
const sealKeySize = 32

// Sealer encrypts secrets under a key file in the data directory, so a copy
// of the database alone reveals nothing.
//
// A sealed value is a random 12-byte nonce followed by the AES-256-GCM
// ciphertext and its 16-byte tag. A Sealer is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// OpenSealer loads the 32-byte key at path, creating it from crypto/rand
// when the file does not exist. A new key is written to a temporary file in
// the same directory, synced, and linked into place, so a crash never leaves
// a partial key at path and two processes racing to create it end up sharing
// one key rather than one overwriting the other's. The file must be a
// regular file of exactly 32 bytes with no permission bits beyond 0600;
// anything else is an error naming path.
func OpenSealer(path string) (*Sealer, error) {
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(path)
	}
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return &Sealer{aead: aead}, nil
}

// readKey reads and checks the key file at path. A missing file is an error
// matching fs.ErrNotExist.
func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening key file: %w", err)
	}
	defer f.Close()
	// Stat the open file rather than the path, so the checks apply to the
	// bytes read.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checking key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		return nil, fmt.Errorf("key file %s has mode %#o, want 0600 or narrower", path, perm)
	}
	key, err := io.ReadAll(io.LimitReader(f, sealKeySize+1))
	if err != nil {
		return nil, fmt.Errorf("reading key file: %w", err)
	}
	if len(key) > sealKeySize {
		return nil, fmt.Errorf("key file %s holds more than %d bytes, want %d", path, sealKeySize, sealKeySize)
	}
	if len(key) < sealKeySize {
		return nil, fmt.Errorf("key file %s holds %d bytes, want %d", path, len(key), sealKeySize)
	}
	return key, nil
}

// createKey writes a new random key to path unless a file appears there
// first, in which case that file's key is returned.
func createKey(path string) (key []byte, err error) {
	key = make([]byte, sealKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	dir := filepath.Dir(path)
	// CreateTemp makes the file with mode 0600.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("creating key file: %w", err)
	}
	defer os.Remove(tmp.Name()) // once linked, path keeps the key
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("syncing key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("closing key file: %w", err)
	}
	// A hard link, unlike a rename, never replaces an existing file: if
	// another process created the key meanwhile, its key wins and values it
	// already sealed stay readable.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKey(path)
		}
		return nil, fmt.Errorf("installing key file: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return key, nil
}

// syncDir makes the directory entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening key directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing key directory: %w", err)
	}
	return nil
}

// Seal encrypts plaintext with context (for example the sandbox ID the value
// belongs to) as additional authenticated data: the result opens only with
// the same context, so a sealed value copied to another sandbox's row fails
// to open.
func (s *Sealer) Seal(plaintext []byte, context string) ([]byte, error) {
	// The random-nonce AEAD draws from crypto/rand, which does not fail, so
	// there is no error to report today; the signature leaves room for a
	// key-management backend that can.
	return s.aead.Seal(nil, nil, plaintext, []byte(context)), nil
}

// Open decrypts a value made by Seal with the same key and context. A value
// that was altered, sealed under another key or with another context is an
// error that reveals nothing about its content.
func (s *Sealer) Open(sealed []byte, context string) ([]byte, error) {
	if len(sealed) < s.aead.Overhead() {
		return nil, fmt.Errorf("opening sealed value: %d bytes is too short", len(sealed))
	}
	plaintext, err := s.aead.Open(nil, nil, sealed, []byte(context))
	if err != nil {
		return nil, fmt.Errorf("opening sealed value: %w", err)
	}
	return plaintext, nil
}
