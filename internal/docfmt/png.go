package docfmt

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"io"

	"github.com/berthdev/berth/internal/errcode"
)

// Limits of PNG checking. A decoded image takes up to 8 bytes a pixel.
const (
	MaxPNGSide   = 20000
	MaxPNGPixels = 200_000_000
)

// PNG checks that r holds a sound PNG, decoding its header and then the
// whole image, and returns its size.
//
// Images over [MaxPNGSide] pixels a side or [MaxPNGPixels] in all are
// refused after reading only the header, with a PayloadTooLarge error
// ("png_too_large"). A file that is not a PNG, or whose data is corrupt or
// cut short, gets an Invalid one ("png_invalid"); an error reading r is
// returned wrapped. PNG reads r up to the end of the image data, not
// necessarily to EOF.
func PNG(r io.Reader) (width, height int, err error) {
	src := &recordingReader{r: r}
	// The header is read twice: once alone, to check the size before
	// anything big is allocated, and again by the full decode.
	var head bytes.Buffer
	cfg, err := png.DecodeConfig(io.TeeReader(src, &head))
	if err != nil {
		return 0, 0, src.classify(err, "not a PNG")
	}
	if cfg.Width > MaxPNGSide || cfg.Height > MaxPNGSide || int64(cfg.Width)*int64(cfg.Height) > MaxPNGPixels {
		return 0, 0, errcode.PNGTooLarge.New("PNG is %dx%d pixels; the limits are %d a side and %d in all", cfg.Width, cfg.Height, MaxPNGSide, MaxPNGPixels)
	}
	img, err := png.Decode(io.MultiReader(&head, src))
	if err != nil {
		return 0, 0, src.classify(err, "corrupt PNG")
	}
	b := img.Bounds()
	return b.Dx(), b.Dy(), nil
}

// recordingReader remembers the first error of r other than io.EOF, so that
// a failure to read can be told from bad data.
type recordingReader struct {
	r   io.Reader
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return n, err
}

func (r *recordingReader) classify(err error, what string) error {
	if r.err != nil {
		return fmt.Errorf("reading PNG: %w", r.err)
	}
	return errcode.PNGInvalid.New("%s: %v", what, err)
}
