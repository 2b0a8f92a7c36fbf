package browser

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChromiumEnv(t *testing.T) {
	t.Parallel()
	daemon := []string{
		"PATH=/home/op/bin:/usr/bin", "HOME=/root", "BERTH_TOKEN=bk_secret", "AWS_SECRET_ACCESS_KEY=x",
		"DATABASE_URL=postgres://u:p@h/db", "LANG=de_DE.UTF-8", "LC_ALL=C.UTF-8", "LC_TIME=en_GB.UTF-8",
		"TZ=Europe/Paris", "LANGUAGE=de", "XDG_RUNTIME_DIR=/run/user/0", "LD_PRELOAD=/tmp/evil.so",
		"LCX=not-a-locale", "malformed",
	}
	got := chromiumEnv("/data/browser/profile-brs_1", daemon)
	want := []string{
		"PATH=" + chromiumPath,
		"HOME=/data/browser/profile-brs_1/.home",
		"XDG_CONFIG_HOME=/data/browser/profile-brs_1/.home/.config",
		"XDG_CACHE_HOME=/data/browser/profile-brs_1/.home/.cache",
		"XDG_DATA_HOME=/data/browser/profile-brs_1/.home/.local/share",
		"XDG_STATE_HOME=/data/browser/profile-brs_1/.home/.local/state",
		"XDG_RUNTIME_DIR=/data/browser/profile-brs_1/.home/.run",
		"LANG=de_DE.UTF-8", "LC_ALL=C.UTF-8", "LC_TIME=en_GB.UTF-8", "TZ=Europe/Paris", "LANGUAGE=de",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chromiumEnv(daemon) mismatch (-want +got):\n%s", diff)
	}
}
