// Package ident makes Berth's opaque identifiers and random tokens.
package ident

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// New returns prefix followed by 26 lowercase base32 characters (128
// random bits): the form of every Berth resource ID ("sbx_", "cmd_", ...).
// IDs are never credentials.
func New(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on Linux
	return prefix + strings.ToLower(b32.EncodeToString(b[:]))
}

// Token returns prefix followed by 52 base32 characters (256 random bits).
func Token(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(b32.EncodeToString(b[:]))
}
