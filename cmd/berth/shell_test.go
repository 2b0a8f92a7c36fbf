package main_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/testenv"
)

// TestShell drives berth shell with piped standard input, as a script
// would: what the shell prints arrives, berth exits with the shell's code,
// and the terminal is deleted at the end.
func TestShell(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	id := c.newSandbox()

	// The input line echoes too; the shell's own output is the line that
	// holds only hi-from-shell (after a newline, or the prompt's \r).
	printed := regexp.MustCompile(`(?m)(^|\r)hi-from-shell\r$`)
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantOut  *regexp.Regexp
	}{
		{"piped commands", "echo hi-from-shell; exit 3\n", nil, 3, printed},
		{"end of input ends the shell", "echo hi-from-shell\n", nil, 0, printed},
		{"command", "", []string{"--", "sh", "-c", "echo \"$TERM\"; stty size; exit 4"}, 4,
			regexp.MustCompile(`^xterm-256color\r\n24 80\r\n$`)},
		{"signal", "", []string{"--", "sh", "-c", "kill -KILL $$"}, 137, regexp.MustCompile(`^$`)},
		{"cwd and env", "", []string{"--cwd", "sub", "-e", "FOO=bar", "--", "sh", "-c", `echo "$FOO ${PWD##*/}"`}, 0,
			regexp.MustCompile(`^bar sub\r\n$`)},
	}
	c.ok("fs", "mkdir", id, "sub")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d)
			r := c.runIn(tt.stdin, append([]string{"shell", id}, tt.args...)...)
			if r.code != tt.wantCode || !tt.wantOut.MatchString(r.stdout) {
				t.Errorf("%v\nwant exit %d and stdout matching %s", r, tt.wantCode, tt.wantOut)
			}
		})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if list, err := d.Client.Terminals(ctx, id); err != nil || len(list) != 0 {
			t.Errorf("terminals after berth shell = %+v, %v, want none", list, err)
		}
	})

	c.fails(2, "requires at least 1 arg", "shell")
	c.fails(1, "not_found", "shell", "sbx_"+"aaaaaaaaaaaaaaaaaaaaaaaaaa")
}
