package docfmt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/errcode"
)

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngChunk returns a PNG chunk with its length and CRC.
func pngChunk(typ string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	out = append(out, typ...)
	out = append(out, data...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// pngHeader returns a PNG signature and an IHDR declaring an 8-bit RGBA
// image of w x h pixels, followed by an IDAT holding a few bytes of
// compressed zeros: far too little data for the image.
func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	out := append([]byte("\x89PNG\r\n\x1a\n"), pngChunk("IHDR", ihdr)...)
	return append(out, pngChunk("IDAT", deflate(make([]byte, 64)))...)
}

func TestPNGValid(t *testing.T) {
	t.Parallel()
	pal := image.NewPaletted(image.Rect(0, 0, 5, 7), color.Palette{color.Black, color.White})
	tests := []struct {
		name string
		img  image.Image
	}{
		{"rgba", image.NewRGBA(image.Rect(0, 0, 640, 480))},
		{"gray16", image.NewGray16(image.Rect(0, 0, 3, 1000))},
		{"paletted", pal},
		{"one pixel", image.NewNRGBA(image.Rect(0, 0, 1, 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := encodePNG(t, tt.img)
			w, h, err := docfmt.PNG(bytes.NewReader(b))
			want := tt.img.Bounds()
			if err != nil || w != want.Dx() || h != want.Dy() {
				t.Errorf("PNG() = %d, %d, %v; want %d, %d, nil", w, h, err, want.Dx(), want.Dy())
			}
		})
	}
}

func TestPNGInvalid(t *testing.T) {
	t.Parallel()
	good := encodePNG(t, image.NewRGBA(image.Rect(0, 0, 100, 100)))
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-20] ^= 0xff // inside the IDAT
	tests := []struct {
		name   string
		data   []byte
		code   errcode.Code
		reason string
		msg    string
	}{
		{"empty", nil, errcode.Invalid, "png_invalid", "not a PNG"},
		{"jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01"), errcode.Invalid, "png_invalid", "not a PNG"},
		{"text", []byte("hello, world"), errcode.Invalid, "png_invalid", "not a PNG"},
		{"header only", good[:33], errcode.Invalid, "png_invalid", "corrupt PNG"},
		{"truncated", good[:len(good)/2], errcode.Invalid, "png_invalid", "corrupt PNG"},
		{"bad checksum", badCRC, errcode.Invalid, "png_invalid", "corrupt PNG"},
		{"data too short for size", pngHeader(50, 50), errcode.Invalid, "png_invalid", "corrupt PNG"},
		{"bomb", pngHeader(100000, 100000), errcode.PayloadTooLarge, "png_too_large", "PNG is 100000x100000 pixels"},
		{"too wide", pngHeader(20001, 1), errcode.PayloadTooLarge, "png_too_large", "PNG is 20001x1 pixels"},
		{"too tall", pngHeader(1, 20001), errcode.PayloadTooLarge, "png_too_large", "PNG is 1x20001 pixels"},
		{"too many pixels", pngHeader(15000, 15000), errcode.PayloadTooLarge, "png_too_large", "PNG is 15000x15000 pixels"},
		// The decoder itself refuses sizes whose byte count overflows.
		{"overflowing size", pngHeader(0x7fffffff, 0x7fffffff), errcode.Invalid, "png_invalid", "not a PNG: png: unsupported feature: dimension overflow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, h, err := docfmt.PNG(bytes.NewReader(tt.data))
			if err == nil {
				t.Fatalf("PNG() = %d, %d, nil; want an error containing %q", w, h, tt.msg)
			}
			if got := errcode.CodeOf(err); got != tt.code || errcode.ReasonOf(err) != tt.reason {
				t.Errorf("PNG() error = %v (code %s, reason %q), want %s/%s", err, got, errcode.ReasonOf(err), tt.code, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("PNG() error = %q, want it to contain %q", err, tt.msg)
			}
		})
	}
}

// allocated returns the bytes allocated while f ran. Other goroutines'
// allocations count too, so callers do not run in parallel.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPNGBombDoesNotAllocate is not parallel: it measures the process's
// allocations.
func TestPNGBombDoesNotAllocate(t *testing.T) {
	bomb := pngHeader(20000, 20000) // 400 megapixels: 1.6 GB decoded
	if got := allocated(func() { docfmt.PNG(bytes.NewReader(bomb)) }); got > 1<<20 {
		t.Errorf("PNG() of a 20000x20000 header allocated %d bytes, want under 1 MiB", got)
	}
	// Positive control: a header within the limits, with as little data,
	// does get its image allocated (16 MB) by the decoder before the data
	// runs out, so the measurement above would have seen a bomb go off.
	small := pngHeader(2000, 2000)
	var err error
	if got := allocated(func() { _, _, err = docfmt.PNG(bytes.NewReader(small)) }); got < 8<<20 {
		t.Errorf("PNG() of a 2000x2000 header allocated %d bytes, want over 8 MiB", got)
	}
	if errcode.ReasonOf(err) != "png_invalid" {
		t.Errorf("PNG() of a 2000x2000 header with no data = %v, want png_invalid", err)
	}
}

var errRead = errors.New("connection reset")

type failingReader struct {
	r     io.Reader
	after int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errRead
	}
	p = p[:min(len(p), f.after)]
	n, err := f.r.Read(p)
	f.after -= n
	return n, err
}

func TestPNGReadError(t *testing.T) {
	t.Parallel()
	good := encodePNG(t, image.NewRGBA(image.Rect(0, 0, 100, 100)))
	for _, after := range []int{0, 20, len(good) - 10} {
		_, _, err := docfmt.PNG(&failingReader{bytes.NewReader(good), after})
		if !errors.Is(err, errRead) || errcode.Is(err, errcode.Invalid) {
			t.Errorf("PNG() failing after %d bytes = %v, want %v, not classified invalid", after, err, errRead)
		}
	}
	if w, _, err := docfmt.PNG(&failingReader{bytes.NewReader(good), len(good) + 1}); w != 100 || err != nil {
		t.Errorf("PNG() failing past the end = %d, %v; want 100, nil", w, err)
	}
}

func FuzzPNG(f *testing.F) {
	f.Add(encodePNG(f, image.NewRGBA(image.Rect(0, 0, 3, 2))))
	f.Add(encodePNG(f, image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.Black})))
	f.Add(pngHeader(30, 30))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, h, err := docfmt.PNG(bytes.NewReader(b))
		switch {
		case err == nil && (w < 1 || h < 1 || w > docfmt.MaxPNGSide || h > docfmt.MaxPNGSide):
			t.Errorf("PNG() = %d, %d, nil; want a size within the limits", w, h)
		case err != nil && errcode.ReasonOf(err) != "png_invalid" && errcode.ReasonOf(err) != "png_too_large":
			t.Errorf("PNG() error %v has reason %q", err, errcode.ReasonOf(err))
		}
	})
}
