package docfmt_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/pptx"
)

const (
	ctTypes = `<?xml version="1.0" encoding="UTF-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/>
<Override PartName="/ppt/slides/slide1.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slide+xml"/>
<Override PartName="/ppt/slides/slide2.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slide+xml"/>
</Types>`
	presXML = `<?xml version="1.0" encoding="UTF-8"?>
<p:presentation xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main">
<p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst>
<p:sldIdLst><p:sldId id="256" r:id="rId2"/><p:sldId id="257" r:id="rId3"/></p:sldIdLst>
<p:sldSz cx="12192000" cy="6858000"/>
</p:presentation>`
	presRels = `<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slideMaster" Target="slideMasters/slideMaster1.xml"/>
<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide1.xml"/>
<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="/ppt/slides/slide2.xml"/>
</Relationships>`
	slideXML = `<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"/>`
)

// minimalPPTX is the smallest package PPTX accepts, with two slides: one
// related by a relative target, one by an absolute one.
func minimalPPTX() map[string]string {
	return map[string]string{
		"[Content_Types].xml":             ctTypes,
		"ppt/presentation.xml":            presXML,
		"ppt/_rels/presentation.xml.rels": presRels,
		"ppt/slides/slide1.xml":           slideXML,
		"ppt/slides/slide2.xml":           slideXML,
	}
}

func zipOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func with(files map[string]string, name, data string) map[string]string {
	files = maps.Clone(files)
	files[name] = data
	return files
}

func without(files map[string]string, name string) map[string]string {
	files = maps.Clone(files)
	delete(files, name)
	return files
}

func smallPNG(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPPTXValid(t *testing.T) {
	t.Parallel()
	deck := func(n int) []byte {
		d := pptx.Deck{}
		for i := range n {
			d.Slides = append(d.Slides, pptx.Slide{Image: smallPNG(t), Notes: fmt.Sprint(i)})
		}
		var b bytes.Buffer
		if err := pptx.Write(&b, d); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	tests := []struct {
		name   string
		pptx   []byte
		slides int
	}{
		{"minimal", zipOf(t, minimalPPTX()), 2},
		{"part names in other case", zipOf(t, map[string]string{
			"[content_types].XML":             ctTypes,
			"PPT/Presentation.xml":            presXML,
			"ppt/_rels/presentation.xml.rels": presRels,
			"ppt/slides/Slide1.xml":           slideXML,
			"ppt/slides/slide2.xml":           slideXML,
		}), 2},
		{"slideshow content type", zipOf(t, with(minimalPPTX(), "[Content_Types].xml",
			strings.Replace(ctTypes, "presentation.main+xml", "slideshow.main+xml", 1))), 2},
		{"pptx.Write, one slide", deck(1), 1},
		{"pptx.Write, seven slides", deck(7), 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := docfmt.PPTX(bytes.NewReader(tt.pptx), int64(len(tt.pptx)))
			if err != nil || n != tt.slides {
				t.Errorf("PPTX() = %d, %v; want %d, nil", n, err, tt.slides)
			}
		})
	}
}

func TestPPTXInvalid(t *testing.T) {
	t.Parallel()
	m := minimalPPTX()
	big := strings.Repeat(" ", 17<<20)
	tests := []struct {
		name, msg string
		pptx      []byte
	}{
		{"not a zip", "not a PPTX: not a zip file", []byte("PK\x03\x04 but not really")},
		{"empty", "not a PPTX: not a zip file", nil},
		{"a PDF", "not a PPTX: not a zip file", classicPDF(1)},
		{"no content types", "not a PPTX: no [Content_Types].xml", zipOf(t, without(m, "[Content_Types].xml"))},
		{"no presentation", "not a PPTX: no ppt/presentation.xml", zipOf(t, without(m, "ppt/presentation.xml"))},
		{"a docx", "not a PPTX: ppt/presentation.xml has content type \"application/xml\"", zipOf(t, with(m, "[Content_Types].xml",
			strings.Replace(ctTypes, `<Override PartName="/ppt/presentation.xml"`, `<Override PartName="/word/document.xml"`, 1)))},
		{"no slides", "PPTX has no slides", zipOf(t, with(m, "ppt/presentation.xml",
			strings.Replace(presXML, `<p:sldId id="256" r:id="rId2"/><p:sldId id="257" r:id="rId3"/>`, "", 1)))},
		{"no presentation rels", "PPTX has no ppt/_rels/presentation.xml.rels", zipOf(t, without(m, "ppt/_rels/presentation.xml.rels"))},
		{"dangling r:id", `PPTX slide "rId3" has no relationship`, zipOf(t, with(m, "ppt/_rels/presentation.xml.rels",
			strings.Replace(presRels, `Id="rId3"`, `Id="rId9"`, 1)))},
		{"slide rel of wrong type", `PPTX slide "rId1" is a http://schemas.openxmlformats.org/officeDocument/2006/relationships/slideMaster relationship`,
			zipOf(t, with(m, "ppt/presentation.xml", strings.Replace(presXML, `r:id="rId2"`, `r:id="rId1"`, 1)))},
		{"missing slide part", `PPTX slide "rId3" points at missing part ppt/slides/slide2.xml`, zipOf(t, without(m, "ppt/slides/slide2.xml"))},
		{"slide without content type", "PPTX slide part ppt/slides/slide2.bin has no content type", zipOf(t, with(with(m,
			"ppt/_rels/presentation.xml.rels", strings.Replace(presRels, "slide2.xml", "slide2.bin", 1)), "ppt/slides/slide2.bin", slideXML))},
		{"sldId without r:id", "PPTX has a p:sldId without r:id", zipOf(t, with(m, "ppt/presentation.xml",
			strings.Replace(presXML, `r:id="rId2"`, `id2="rId2"`, 1)))},
		{"malformed presentation", "PPTX part ppt/presentation.xml is not well-formed XML", zipOf(t, with(m, "ppt/presentation.xml", presXML[:200]))},
		{"malformed content types", "PPTX part [Content_Types].xml is not well-formed XML", zipOf(t, with(m, "[Content_Types].xml", "<Types><"))},
		{"duplicate entries", `PPTX has two entries named "ppt/presentation.xml"`, zipOf(t, with(m, "PPT/presentation.xml", presXML))},
		{"oversized part", "PPTX part ppt/presentation.xml is larger than 16777216 bytes", zipOf(t, with(m, "ppt/presentation.xml", presXML+big))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := docfmt.PPTX(bytes.NewReader(tt.pptx), int64(len(tt.pptx)))
			if err == nil {
				t.Fatalf("PPTX() = %d, nil; want an error containing %q", n, tt.msg)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("PPTX() error = %q, want it to contain %q", err, tt.msg)
			}
			if !errcode.Is(err, errcode.Invalid) || errcode.ReasonOf(err) != "pptx_invalid" {
				t.Errorf("PPTX() error = %v, want invalid/pptx_invalid", err)
			}
		})
	}
}

func TestPPTXReadError(t *testing.T) {
	t.Parallel()
	b := zipOf(t, minimalPPTX())
	size := int64(len(b))
	// The central directory (at the end), then a part's data (near the
	// start, past the first local header).
	for _, bad := range [][2]int64{{size - 30, size}, {60, 70}} {
		n, err := docfmt.PPTX(failingReaderAt{b, bad[0], bad[1]}, size)
		if !errors.Is(err, errDisk) || errcode.Is(err, errcode.Invalid) {
			t.Errorf("PPTX() with reads of %d..%d failing = %d, %v; want %v, not classified invalid", bad[0], bad[1], n, err, errDisk)
		}
	}
	if n, err := docfmt.PPTX(failingReaderAt{b, size, size + 1}, size); n != 2 || err != nil {
		t.Errorf("PPTX() with reads failing past the end = %d, %v; want 2, nil", n, err)
	}
}

func FuzzPPTX(f *testing.F) {
	f.Add(zipOf(f, minimalPPTX()))
	f.Add(zipOf(f, without(minimalPPTX(), "ppt/slides/slide2.xml")))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := docfmt.PPTX(bytes.NewReader(b), int64(len(b)))
		switch {
		case err == nil && n < 1:
			t.Errorf("PPTX() = %d, nil; want at least one slide or an error", n)
		case err != nil && errcode.ReasonOf(err) != "pptx_invalid":
			t.Errorf("PPTX() error %v has reason %q, want pptx_invalid", err, errcode.ReasonOf(err))
		}
	})
}
