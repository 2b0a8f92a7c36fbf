package browser

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/chromedp/chromedp"
)

// The environment of the browsers Berth starts. Chromium never sees the
// daemon's environment (which may hold API keys, database URLs, cloud
// credentials): it starts with an allowlist, and a home of its own.

// chromiumPath is the PATH of every browser: the system's directories,
// not the daemon's PATH (which may name a user's directories). Debian's
// chromium wrapper scripts need sh and coreutils from it.
const chromiumPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// homeDirName is the browser's private home inside its profile directory:
// HOME and the XDG directories point there, so fontconfig caches, crash
// dumps and anything else Chromium writes to a home stay with the profile
// and go with it.
const homeDirName = ".home"

// passedEnv reports whether the daemon's variable name reaches the
// browser: the locale (LANG, LANGUAGE, LC_*) and the time zone (TZ) only.
// Their values are settings, not secrets, and pages see them anyway
// (navigator.language, Intl).
func passedEnv(name string) bool {
	switch name {
	case "LANG", "LANGUAGE", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// chromiumEnv returns the whole environment of a browser whose profile
// directory is dir, from the daemon's environment environ: the allowed
// variables, a fixed PATH and a private home under dir.
func chromiumEnv(dir string, environ []string) []string {
	home := filepath.Join(dir, homeDirName)
	env := []string{
		"PATH=" + chromiumPath,
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_RUNTIME_DIR=" + filepath.Join(home, ".run"),
	}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && passedEnv(name) {
			env = append(env, kv)
		}
	}
	return env
}

// envOptions are the allocator options that give the browser of profile
// directory dir exactly chromiumEnv: chromedp's NoInheritEnv drops the
// daemon's environment (a ModifyCmdFunc would also replace chromedp's own
// Pdeathsig setup, so the environment is set through Env instead). The
// home directories are made here, private to the daemon's user; if that
// fails Chromium still starts, with a home it cannot write.
func envOptions(dir string) []chromedp.ExecAllocatorOption {
	home := filepath.Join(dir, homeDirName)
	for _, d := range []string{".config", ".cache", ".local/share", ".local/state", ".run"} {
		_ = os.MkdirAll(filepath.Join(home, d), 0o700)
	}
	return []chromedp.ExecAllocatorOption{chromedp.NoInheritEnv, chromedp.Env(chromiumEnv(dir, os.Environ())...)}
}
