//go:build !linux

package testenv

func unmountUnder(string) {}
