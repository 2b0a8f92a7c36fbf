package main_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// TestJobCommands runs a conversion as a user would: berth actions, berth
// job run with inputs and options, then ls, get and cancel.
func TestJobCommands(t *testing.T) {
	if testenv.Runtime() != "process" {
		t.Skip("job commands run in the process-runtime pass of make test (jobs always use container sandboxes)")
	}
	testenv.NeedRuntime(t, "container")
	testenv.NeedChromium(t)
	testenv.NeedCommand(t, "pdfinfo")
	t.Parallel()
	logs := &lockedBuffer{}
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.JobPools = map[string]int{"browser": 1}
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	c := newCLI(t, d)

	r := c.ok("actions")
	if !regexp.MustCompile(`(?m)^html-pdf\s+1\.0\.0\s+browser\s+available`).MatchString(r.stdout) {
		t.Errorf("berth actions printed:\n%s\nwant html-pdf available", r.stdout)
	}
	c.fails(1, "ACTION_MISSING", "actions", "nope")
	if strings.Contains(r.stdout, "OPTION") {
		t.Errorf("berth actions (all) printed an options table:\n%s", r.stdout)
	}
	// One action: its options, each with type, default and meaning.
	one := c.ok("actions", "html-pdf").stdout
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^OPTION\s+TYPE\s+DEFAULT\s+MEANING$`),
		regexp.MustCompile(`(?m)^paper\s+A3\|A4\|A5\|Letter\|Legal\|Tabloid\s+"Letter"\s+named paper size`),
		regexp.MustCompile(`(?m)^scale\s+number 0\.1-2\s+1\s+`),
		regexp.MustCompile(`(?m)^wait_delay_ms\s+integer 0-10000\s+0\s+`),
	} {
		if !want.MatchString(one) {
			t.Errorf("berth actions html-pdf printed:\n%s\nwant a line matching %s", one, want)
		}
	}
	if strings.Contains(one, "slide_selector") {
		t.Errorf("berth actions html-pdf lists html-pptx's slide_selector:\n%s", one)
	}
	if js := c.ok("actions", "html-pptx", "--json").stdout; !strings.Contains(js, `"options_schema"`) || !strings.Contains(js, `"slide_selector"`) {
		t.Errorf("berth actions html-pptx --json = %s, want its options and their JSON Schema", js)
	}

	if err := os.WriteFile(filepath.Join(c.dir, "report.html"), []byte(
		`<link rel="stylesheet" href="style.css"><h1>Report</h1><p style="break-after: page">one</p><p>two</p>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "style.css"), []byte(`h1 { color: navy }`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = c.ok("job", "run", "html-pdf", "--in", "index.html=report.html", "--in", "style.css", "--opt", "paper=A4", "--opt", "print_background=true")
	// Not a terminal: one plain line per event, then where the file went.
	for _, want := range []string{"queued", "starting", "running", "succeeded", "wrote index.pdf", "2 pages"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("job run printed:\n%s\nwant %q", r.stderr, want)
		}
	}
	out, err := exec.Command("pdfinfo", filepath.Join(c.dir, "index.pdf")).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Pages:\s+2`).Match(out) || !strings.Contains(string(out), "595.") {
		t.Errorf("pdfinfo index.pdf: %v\n%s\nwant 2 A4 pages", err, out)
	}
	if strings.Contains(r.stderr, "blocked") {
		t.Errorf("job run with every asset an input printed:\n%s\nwant nothing blocked", r.stderr)
	}
	// A page that refers to a remote asset: the job says what it refused.
	if err := os.WriteFile(filepath.Join(c.dir, "remote.html"), []byte(
		`<img src="http://192.0.2.1/logo.png"><h1>Remote</h1>`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = c.ok("job", "run", "html-pdf", "--in", "remote.html", "--out", "named.pdf")
	if !strings.Contains(r.stderr, "blocked 1 request") || !strings.Contains(r.stderr, "http://192.0.2.1/logo.png") {
		t.Errorf("job run of a page with a remote image printed:\n%s\nwant it to name the blocked request", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "named.pdf")); err != nil {
		t.Errorf("--out named.pdf: %v", err)
	}

	ls := c.ok("job", "ls")
	ids := regexp.MustCompile(`(?m)^(job_\w+)\s+html-pdf\s+succeeded\s+1/3`).FindAllStringSubmatch(ls.stdout, -1)
	if len(ids) != 2 {
		t.Fatalf("job ls:\n%s\nwant two succeeded html-pdf jobs", ls.stdout)
	}
	if get := c.ok("job", "get", ids[0][1]).stdout; !strings.Contains(get, `"state": "succeeded"`) || !strings.Contains(get, `"pages": `) {
		t.Errorf("job get printed:\n%s", get)
	}
	c.fails(1, "job_finished", "job", "cancel", ids[0][1])

	// Ctrl-C while a job runs cancels it: the job is the command's.
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd, _, _ := c.command(ctx, "", "job", "run", "html-pdf", "--in", "report.html", "--opt", "wait_for_selector=#never")
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		if code := interrupt(t, cmd, "the job to run", func() bool { return strings.Contains(stderr.String(), "running") }); code != 130 {
			t.Errorf("job run interrupted: exit %d, want 130\nstderr: %s", code, stderr)
		}
		m := regexp.MustCompile(`interrupted; job (job_\w+) \w+`).FindStringSubmatch(stderr.String())
		if m == nil {
			t.Fatalf("job run interrupted printed:\n%s\nwant the job it canceled", stderr)
		}
		testenv.Eventually(t, 60*time.Second, "the interrupted job to be canceled", func() bool {
			return strings.Contains(c.ok("job", "get", m[1]).stdout, `"state": "canceled"`)
		})
		// The operator sees each job's end in the log.
		for _, want := range []string{`msg="job queued" job_id=` + m[1], `msg="job canceled" job_id=` + m[1],
			`msg="job succeeded" job_id=` + ids[0][1]} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the daemon's log lacks %s:\n%s", want, grepLog(logs.String(), "job"))
			}
		}
	}()

	// Bad input: a clear error, no job.
	c.fails(1, "options.scale", "job", "run", "html-pdf", "--in", "report.html", "--opt", "scale=9")
	c.fails(2, "--in", "job", "run", "html-pdf")
	if n := len(regexp.MustCompile(`(?m)^job_`).FindAllString(c.ok("job", "ls").stdout, -1)); n != 3 {
		t.Errorf("refused runs left jobs: %d listed, want 3 (two succeeded, one canceled)", n)
	}
}

// grepLog returns the lines of log that mention word.
func grepLog(log, word string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
