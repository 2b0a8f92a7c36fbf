package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
)

// browserRecordCommand is "berth browser record": recordings of sessions,
// as frames (viewport PNGs) taken every interval.
func (a *app) browserRecordCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "record", Aliases: []string{"rec"}, Short: "Record a session as viewport PNGs taken every few seconds",
		Long: "Record a session: a viewport PNG at the start and then every interval (default 5s), whether\nor not anyone watches. Frames are kept on the daemon until deleted or 7 days after the\nrecording stopped."}

	var interval time.Duration
	start := &cobra.Command{
		Use: "start SESSION", Short: "Start recording a session and print the recording's id", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			rec, err := c.StartRecording(cmd.Context(), args[0], apitype.StartRecordingRequest{IntervalMS: interval.Milliseconds()})
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, rec.ID)
			return nil
		},
	}
	start.Flags().DurationVar(&interval, "interval", 0, "time between frames, 100ms-1m (default: the daemon's, 5s)")

	printJSON := func(v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, string(b))
		return nil
	}
	stop := &cobra.Command{
		Use: "stop RECORDING", Short: "Stop a recording, keeping its frames", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			rec, err := c.StopRecording(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s stopped: %d frames\n", rec.ID, len(rec.Frames))
			return nil
		},
	}
	get := &cobra.Command{
		Use: "get RECORDING", Short: "Print a recording's metadata as JSON (frames described, not included)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			rec, err := c.Recording(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(rec)
		},
	}
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List recordings", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Recordings(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSESSION\tSTATE\tFRAMES\tBYTES\tCREATED")
			for _, r := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.SessionID, withReason(r.State, r.StoppedBy), len(r.Frames), r.Bytes,
					r.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use: "rm RECORDING", Aliases: []string{"delete"}, Short: "Delete a recording and its frames", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.DeleteRecording(cmd.Context(), args[0])
		},
	}
	frame := &cobra.Command{
		Use: "frame RECORDING N FILE", Short: "Write frame N (from 0) of a recording to FILE as PNG", Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return usageError{fmt.Errorf("frame %q must be a number from 0", args[1])}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			png, err := c.RecordingFrame(cmd.Context(), args[0], n)
			if err != nil {
				return err
			}
			return saveFile(args[2], bytes.NewReader(png))
		},
	}
	var format string
	export := &cobra.Command{
		Use: "export RECORDING FILE", Short: "Export a recording as a ZIP (frames and index.json) or an MP4", Args: cobra.ExactArgs(2),
		Long: "Export a recording: a ZIP of frames/000000.png... and index.json, or with --format mp4\n(or a FILE ending in .mp4) an H.264 MP4, which needs ffmpeg on the daemon's host.",
		RunE: func(cmd *cobra.Command, args []string) error {
			f := format
			if f == "" {
				f = "zip"
				if strings.EqualFold(filepath.Ext(args[1]), ".mp4") {
					f = "mp4"
				}
			}
			if f != "zip" && f != "mp4" {
				return usageError{fmt.Errorf("--format %q must be zip or mp4", format)}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			// Streamed into a temporary file renamed into place: a failed
			// export leaves no file.
			pr, pw := io.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				pw.CloseWithError(c.ExportRecording(cmd.Context(), args[0], f, pw))
			}()
			err = saveFile(args[1], pr)
			pr.CloseWithError(io.ErrClosedPipe) // ends the export if saving failed first
			<-done
			return err
		},
	}
	export.Flags().StringVar(&format, "format", "", "zip or mp4 (default: mp4 for a FILE ending in .mp4, else zip)")

	cmd.AddCommand(start, stop, get, ls, rm, frame, export)
	return cmd
}

// addRecordingFlags adds the flags of "berth serve" that bound
// recordings to f, writing them into c. Each is checked as it is parsed.
func addRecordingFlags(f *pflag.FlagSet, c *browser.RecordingConfig) {
	c.Interval, c.MaxFrames, c.MaxRecordings = browser.DefaultRecordingInterval, browser.DefaultMaxRecordingFrames, browser.DefaultMaxRecordings
	c.MaxBytes, c.TTL = browser.DefaultMaxRecordingBytes, browser.DefaultRecordingTTL
	f.Var(&boundedDuration{&c.Interval, browser.MinRecordingInterval, browser.MaxRecordingInterval}, "browser-recording-interval",
		"time between a recording's frames when its start names none (100ms-1m)")
	f.Var(&boundedInt{&c.MaxFrames, 1, 100000}, "max-recording-frames", "most frames of one recording: reaching it stops the recording")
	f.Var(&boundedInt{&c.MaxRecordings, 1, 10000}, "max-recordings", "most recordings kept (stopped ones included): starting another is refused")
	f.Var((*sizeValue)(&c.MaxBytes), "max-recording-bytes", "most PNG bytes of every recording together (64m, 1g): reaching it stops capture")
	f.Var(&boundedDuration{&c.TTL, time.Second, 10 * 365 * 24 * time.Hour}, "browser-recording-ttl", "how long a stopped recording is kept")
}

// boundedDuration is a duration flag between lo and hi.
type boundedDuration struct {
	d      *time.Duration
	lo, hi time.Duration
}

func (b *boundedDuration) String() string {
	if b.d == nil {
		return ""
	}
	return b.d.String()
}
func (b *boundedDuration) Type() string { return "duration" }
func (b *boundedDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < b.lo || d > b.hi {
		return fmt.Errorf("want a duration between %s and %s", b.lo, b.hi)
	}
	*b.d = d
	return nil
}

// boundedInt is an integer flag between lo and hi.
type boundedInt struct {
	n      *int
	lo, hi int
}

func (b *boundedInt) String() string {
	if b.n == nil {
		return ""
	}
	return strconv.Itoa(*b.n)
}
func (b *boundedInt) Type() string { return "int" }
func (b *boundedInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < b.lo || n > b.hi {
		return fmt.Errorf("want a number between %d and %d", b.lo, b.hi)
	}
	*b.n = n
	return nil
}
