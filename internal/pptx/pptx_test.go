package pptx_test

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/pptx"
)

// solidPNG returns a w x h PNG of one colour.
func solidPNG(t testing.TB, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func write(t testing.TB, d pptx.Deck) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := pptx.Write(&b, d); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return b.Bytes()
}

// unzip returns the zip's entries by name, failing on duplicates.
func unzip(t testing.TB, b []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("reading zip: %v", err)
	}
	files := make(map[string][]byte)
	for _, f := range zr.File {
		if _, dup := files[f.Name]; dup {
			t.Errorf("duplicate zip entry %s", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("reading %s: %v", f.Name, err)
		}
		files[f.Name] = data
	}
	return files
}

type relationships struct {
	Rels []struct {
		ID         string `xml:"Id,attr"`
		Type       string `xml:"Type,attr"`
		Target     string `xml:"Target,attr"`
		TargetMode string `xml:"TargetMode,attr"`
	} `xml:"Relationship"`
}

// partRels returns the relationships of part (a zip name), with targets
// resolved to zip names, keyed by relationship type suffix ("slide",
// "theme", ...); a type related twice is an error.
func partRels(t testing.TB, files map[string][]byte, part string) map[string]string {
	t.Helper()
	relsName := path.Join(path.Dir(part), "_rels", path.Base(part)+".rels")
	if part == "" {
		relsName = "_rels/.rels"
	}
	data, ok := files[relsName]
	if !ok {
		return nil
	}
	var rs relationships
	if err := xml.Unmarshal(data, &rs); err != nil {
		t.Fatalf("parsing %s: %v", relsName, err)
	}
	out := make(map[string]string)
	for _, r := range rs.Rels {
		typ := path.Base(r.Type)
		if _, dup := out[typ]; dup && typ != "slide" {
			t.Errorf("%s relates %s twice", relsName, typ)
		}
		out[typ] = path.Join(path.Dir(part), r.Target)
	}
	return out
}

// checkPackage checks the OPC rules PowerPoint enforces: every part is well
// formed and has a content type, every override names a part, every
// relationship target exists, relationship IDs are unique per part, and
// every part is reachable from the package's root relationships.
func checkPackage(t testing.TB, files map[string][]byte) {
	t.Helper()
	var ct struct {
		Defaults []struct {
			Ext string `xml:"Extension,attr"`
			CT  string `xml:"ContentType,attr"`
		} `xml:"Default"`
		Overrides []struct {
			Part string `xml:"PartName,attr"`
			CT   string `xml:"ContentType,attr"`
		} `xml:"Override"`
	}
	if err := xml.Unmarshal(files["[Content_Types].xml"], &ct); err != nil {
		t.Fatalf("parsing [Content_Types].xml: %v", err)
	}
	types := make(map[string]string) // ".ext" or "/part" to content type
	for _, d := range ct.Defaults {
		types["."+d.Ext] = d.CT
	}
	for _, o := range ct.Overrides {
		if _, ok := files[strings.TrimPrefix(o.Part, "/")]; !ok {
			t.Errorf("content type override for missing part %s", o.Part)
		}
		types[o.Part] = o.CT
	}
	for name, data := range files {
		if name == "[Content_Types].xml" {
			continue
		}
		if types["/"+name] == "" && types[path.Ext(name)] == "" {
			t.Errorf("part %s has no content type", name)
		}
		if strings.HasSuffix(name, ".xml") || strings.HasSuffix(name, ".rels") {
			if err := wellFormed(data); err != nil {
				t.Errorf("%s is not well-formed XML: %v", name, err)
			}
		}
	}
	// PowerPoint finds parts by their specific content types: the generic
	// application/xml default would do for OPC, not for it.
	for name := range files {
		if strings.HasSuffix(name, ".xml") && name != "[Content_Types].xml" {
			if ct := types["/"+name]; ct == "" || ct == "application/xml" {
				t.Errorf("%s has no specific content type (override %q)", name, ct)
			}
		}
	}

	// Walk the relationships from the root.
	reached := map[string]bool{}
	queue := []string{""}
	for len(queue) > 0 {
		src := queue[0]
		queue = queue[1:]
		relsName := "_rels/.rels"
		if src != "" {
			relsName = path.Join(path.Dir(src), "_rels", path.Base(src)+".rels")
		}
		data, ok := files[relsName]
		if !ok {
			continue
		}
		reached[relsName] = true
		var rs relationships
		if err := xml.Unmarshal(data, &rs); err != nil {
			t.Fatalf("parsing %s: %v", relsName, err)
		}
		ids := map[string]bool{}
		for _, r := range rs.Rels {
			if ids[r.ID] {
				t.Errorf("%s: duplicate relationship id %s", relsName, r.ID)
			}
			ids[r.ID] = true
			if r.TargetMode == "External" {
				continue
			}
			target := path.Join(path.Dir(src), r.Target)
			if _, ok := files[target]; !ok {
				t.Errorf("%s: %s (%s) points at missing part %s", relsName, r.ID, path.Base(r.Type), target)
				continue
			}
			if !reached[target] {
				reached[target] = true
				queue = append(queue, target)
			}
		}
	}
	for name := range files {
		if name != "[Content_Types].xml" && !reached[name] {
			t.Errorf("part %s is not reachable through relationships", name)
		}
	}
}

func wellFormed(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type presentation struct {
	SldMasterIDs  []string `xml:"sldMasterIdLst>sldMasterId"`
	NotesMasterID []struct {
		RID string `xml:"id,attr"`
	} `xml:"notesMasterIdLst>notesMasterId"`
	SldIDs []sldID `xml:"sldIdLst>sldId"`
	SldSz  struct {
		CX int64 `xml:"cx,attr"`
		CY int64 `xml:"cy,attr"`
	} `xml:"sldSz"`
	NotesSz struct {
		CX int64 `xml:"cx,attr"`
		CY int64 `xml:"cy,attr"`
	} `xml:"notesSz"`
}

// sldID is a p:sldId. Its id and r:id attributes share a local name, which
// encoding/xml's attribute tags cannot tell apart.
type sldID struct {
	Attrs []xml.Attr `xml:",any,attr"`
}

func (s sldID) attr(space string) string {
	for _, a := range s.Attrs {
		if a.Name.Local == "id" && a.Name.Space == space {
			return a.Value
		}
	}
	return ""
}

// ID returns the slide's id attribute.
func (s sldID) ID() int64 {
	n, _ := strconv.ParseInt(s.attr(""), 10, 64)
	return n
}

// RID returns the slide's r:id attribute.
func (s sldID) RID() string {
	return s.attr("http://schemas.openxmlformats.org/officeDocument/2006/relationships")
}

// slidePic is what a slide's picture says about itself.
type slidePic struct {
	Pics []struct {
		Blip struct {
			Embed string `xml:"embed,attr"`
		} `xml:"blipFill>blip"`
		Stretch *struct {
			FillRect *struct{} `xml:"fillRect"`
		} `xml:"blipFill>stretch"`
		Off struct {
			X int64 `xml:"x,attr"`
			Y int64 `xml:"y,attr"`
		} `xml:"spPr>xfrm>off"`
		Ext struct {
			CX int64 `xml:"cx,attr"`
			CY int64 `xml:"cy,attr"`
		} `xml:"spPr>xfrm>ext"`
	} `xml:"cSld>spTree>pic"`
}

// notesText returns the text of a notes slide's body placeholder, one line
// per paragraph, and whether it has a slide-image placeholder.
func notesText(t testing.TB, data []byte) (text string, sldImg bool) {
	t.Helper()
	var n struct {
		Shapes []struct {
			Ph *struct {
				Type string `xml:"type,attr"`
			} `xml:"nvSpPr>nvPr>ph"`
			Paras []struct {
				Runs []string `xml:"r>t"`
			} `xml:"txBody>p"`
		} `xml:"cSld>spTree>sp"`
	}
	if err := xml.Unmarshal(data, &n); err != nil {
		t.Fatalf("parsing notes slide: %v", err)
	}
	var lines []string
	bodies := 0
	for _, sp := range n.Shapes {
		if sp.Ph == nil {
			continue
		}
		switch sp.Ph.Type {
		case "sldImg":
			sldImg = true
		case "body":
			bodies++
			for _, p := range sp.Paras {
				lines = append(lines, strings.Join(p.Runs, ""))
			}
		}
	}
	if bodies != 1 {
		t.Errorf("notes slide has %d body placeholders, want 1", bodies)
	}
	return strings.Join(lines, "\n"), sldImg
}

func TestWritePackage(t *testing.T) {
	t.Parallel()
	red := solidPNG(t, 16, 9, color.RGBA{255, 0, 0, 255})
	blue := solidPNG(t, 4, 3, color.RGBA{0, 0, 255, 255})
	tests := []struct {
		name          string
		deck          pptx.Deck
		width, height int64
	}{
		{
			name:  "one slide default size",
			deck:  pptx.Deck{Slides: []pptx.Slide{{Image: red}}},
			width: 12192000, height: 6858000,
		},
		{
			name: "notes on some slides",
			deck: pptx.Deck{Title: "Q3 <review> & plans", Slides: []pptx.Slide{
				{Image: red, Notes: "first"}, {Image: blue}, {Image: red, Notes: "third\nsecond line"},
			}},
			width: 12192000, height: 6858000,
		},
		{
			name:  "4:3 with notes everywhere",
			deck:  pptx.Deck{Width: 9144000, Height: 6858000, Slides: []pptx.Slide{{Image: blue, Notes: "a"}, {Image: blue, Notes: "b"}}},
			width: 9144000, height: 6858000,
		},
		{
			name:  "portrait at the limits",
			deck:  pptx.Deck{Width: pptx.MinSize, Height: pptx.MaxSize, Slides: []pptx.Slide{{Image: red, Notes: "tall"}}},
			width: 914400, height: 51206400,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := write(t, tt.deck)
			files := unzip(t, out)
			checkPackage(t, files)

			var pres presentation
			if err := xml.Unmarshal(files["ppt/presentation.xml"], &pres); err != nil {
				t.Fatal(err)
			}
			if got := len(pres.SldIDs); got != len(tt.deck.Slides) {
				t.Errorf("sldIdLst has %d slides, want %d", got, len(tt.deck.Slides))
			}
			if pres.SldSz.CX != tt.width || pres.SldSz.CY != tt.height {
				t.Errorf("sldSz = %dx%d, want %dx%d", pres.SldSz.CX, pres.SldSz.CY, tt.width, tt.height)
			}
			if pres.NotesSz.CX != 6858000 || pres.NotesSz.CY != 9144000 {
				t.Errorf("notesSz = %dx%d, want 6858000x9144000", pres.NotesSz.CX, pres.NotesSz.CY)
			}
			anyNotes := slices.ContainsFunc(tt.deck.Slides, func(s pptx.Slide) bool { return s.Notes != "" })
			if got := len(pres.NotesMasterID) == 1; got != anyNotes {
				t.Errorf("notesMasterIdLst present = %v, want %v", got, anyNotes)
			}
			if len(pres.SldMasterIDs) != 1 {
				t.Errorf("sldMasterIdLst has %d entries, want 1", len(pres.SldMasterIDs))
			}

			presRels := presentationRels(t, files)
			master := partRels(t, files, "ppt/slideMasters/slideMaster1.xml")
			if master["theme"] == "" || master["slideLayout"] == "" {
				t.Errorf("slide master relations = %v, want a theme and a layout", master)
			}
			if got := partRels(t, files, master["slideLayout"])["slideMaster"]; got != "ppt/slideMasters/slideMaster1.xml" {
				t.Errorf("layout's master = %q, want ppt/slideMasters/slideMaster1.xml", got)
			}
			if !bytes.Contains(files["ppt/slideMasters/slideMaster1.xml"], []byte("<p:clrMap ")) ||
				!bytes.Contains(files["ppt/slideMasters/slideMaster1.xml"], []byte("<p:txStyles>")) {
				t.Error("slide master lacks clrMap or txStyles")
			}
			if anyNotes {
				nm := partRels(t, files, "ppt/notesMasters/notesMaster1.xml")
				if nm["theme"] == "" {
					t.Errorf("notes master relations = %v, want a theme", nm)
				}
			}

			for i, s := range tt.deck.Slides {
				slidePart := presRels[pres.SldIDs[i].RID()]
				if want := fmt.Sprintf("ppt/slides/slide%d.xml", i+1); slidePart != want {
					t.Errorf("slide %d is %q, want %q", i+1, slidePart, want)
				}
				if id := pres.SldIDs[i].ID(); id < 256 || id >= 2147483648 {
					t.Errorf("slide %d has id %d, outside 256..2147483647", i+1, id)
				}
				if i > 0 && pres.SldIDs[i].ID() <= pres.SldIDs[i-1].ID() {
					t.Errorf("slide ids not increasing: %d after %d", pres.SldIDs[i].ID(), pres.SldIDs[i-1].ID())
				}
				rels := partRels(t, files, slidePart)
				if rels["slideLayout"] == "" {
					t.Errorf("slide %d has no layout relation", i+1)
				}
				if !bytes.Equal(files[rels["image"]], s.Image) {
					t.Errorf("slide %d image %s differs from the input", i+1, rels["image"])
				}
				var sp slidePic
				if err := xml.Unmarshal(files[slidePart], &sp); err != nil {
					t.Fatal(err)
				}
				if len(sp.Pics) != 1 {
					t.Fatalf("slide %d has %d pictures, want 1", i+1, len(sp.Pics))
				}
				pic := sp.Pics[0]
				if pic.Stretch == nil || pic.Stretch.FillRect == nil {
					t.Errorf("slide %d picture is not stretched (a:stretch/a:fillRect)", i+1)
				}
				if pic.Off.X != 0 || pic.Off.Y != 0 || pic.Ext.CX != tt.width || pic.Ext.CY != tt.height {
					t.Errorf("slide %d picture at (%d,%d) size %dx%d, want (0,0) %dx%d",
						i+1, pic.Off.X, pic.Off.Y, pic.Ext.CX, pic.Ext.CY, tt.width, tt.height)
				}
				imageRel := ""
				for id, target := range relsByID(t, files, slidePart) {
					if target == rels["image"] {
						imageRel = id
					}
				}
				if pic.Blip.Embed != imageRel {
					t.Errorf("slide %d picture embeds %q, want the image relation %q", i+1, pic.Blip.Embed, imageRel)
				}

				notesPart := rels["notesSlide"]
				if (notesPart != "") != (s.Notes != "") {
					t.Errorf("slide %d notes slide = %q with notes %q", i+1, notesPart, s.Notes)
				}
				if notesPart == "" {
					continue
				}
				nr := partRels(t, files, notesPart)
				if nr["slide"] != slidePart {
					t.Errorf("%s relates to slide %q, want %q", notesPart, nr["slide"], slidePart)
				}
				if nr["notesMaster"] != "ppt/notesMasters/notesMaster1.xml" {
					t.Errorf("%s notes master = %q", notesPart, nr["notesMaster"])
				}
				text, sldImg := notesText(t, files[notesPart])
				if text != s.Notes {
					t.Errorf("slide %d notes = %q, want %q", i+1, text, s.Notes)
				}
				if !sldImg {
					t.Errorf("%s has no slide image placeholder", notesPart)
				}
			}

			if tt.deck.Title != "" {
				var core struct {
					Title string `xml:"title"`
				}
				if err := xml.Unmarshal(files["docProps/core.xml"], &core); err != nil {
					t.Fatal(err)
				}
				if core.Title != tt.deck.Title {
					t.Errorf("dc:title = %q, want %q", core.Title, tt.deck.Title)
				}
			}

			n, err := docfmt.PPTX(bytes.NewReader(out), int64(len(out)))
			if err != nil || n != len(tt.deck.Slides) {
				t.Errorf("docfmt.PPTX = %d, %v; want %d, nil", n, err, len(tt.deck.Slides))
			}
		})
	}
}

func relsByID(t testing.TB, files map[string][]byte, part string) map[string]string {
	t.Helper()
	var rs relationships
	if err := xml.Unmarshal(files[path.Join(path.Dir(part), "_rels", path.Base(part)+".rels")], &rs); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, r := range rs.Rels {
		out[r.ID] = path.Join(path.Dir(part), r.Target)
	}
	return out
}

func presentationRels(t testing.TB, files map[string][]byte) map[string]string {
	t.Helper()
	return relsByID(t, files, "ppt/presentation.xml")
}

func TestNotesText(t *testing.T) {
	t.Parallel()
	img := solidPNG(t, 2, 2, color.White)
	tests := []struct {
		name, notes, want string
	}{
		{"plain", "Say hello.", "Say hello."},
		{"markup", `<b>bold</b> & "quotes" 'single' ]]>`, `<b>bold</b> & "quotes" 'single' ]]>`},
		{"paragraphs", "one\ntwo\n\nfour", "one\ntwo\n\nfour"},
		{"crlf and cr", "one\r\ntwo\rthree", "one\ntwo\nthree"},
		{"spaces and tabs kept", "  indented\tand tabbed  ", "  indented\tand tabbed  "},
		{"unicode", "Grüße 👋 日本語", "Grüße 👋 日本語"},
		{"control characters dropped", "a\x00b\x1bc\x7fd\uFFFEe", "abc\x7fde"},
		{"invalid utf-8 dropped", "ok\xff\xfe!", "ok!"},
		{"trailing newline", "last\n", "last\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := unzip(t, write(t, pptx.Deck{Slides: []pptx.Slide{{Image: img, Notes: tt.notes}}}))
			data, ok := files["ppt/notesSlides/notesSlide1.xml"]
			if !ok {
				t.Fatal("no notes slide")
			}
			got, _ := notesText(t, data)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("notes of %q mismatch (-want +got):\n%s", tt.notes, diff)
			}
		})
	}
}

func TestNotesOnlyInvalidCharacters(t *testing.T) {
	t.Parallel()
	// Notes that clean to nothing get no notes slide, and so no notes master.
	files := unzip(t, write(t, pptx.Deck{Slides: []pptx.Slide{{Image: solidPNG(t, 2, 2, color.White), Notes: "\x00\x01"}}}))
	checkPackage(t, files)
	for name := range files {
		if strings.Contains(name, "notes") {
			t.Errorf("unexpected part %s", name)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	t.Parallel()
	img := solidPNG(t, 2, 2, color.White)
	jpegish := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	many := make([]pptx.Slide, pptx.MaxSlides+1)
	for i := range many {
		many[i] = pptx.Slide{Image: img}
	}
	// A PNG whose IHDR claims zero width.
	zeroWidth := bytes.Clone(img)
	copy(zeroWidth[16:20], []byte{0, 0, 0, 0})
	tests := []struct {
		name   string
		deck   pptx.Deck
		code   errcode.Code
		reason string
		msg    string
	}{
		{"no slides", pptx.Deck{}, errcode.Invalid, "deck_invalid", "deck has no slides"},
		{"too many slides", pptx.Deck{Slides: many}, errcode.PayloadTooLarge, "deck_too_large", "deck has 1001 slides, more than 1000"},
		{"nil image", pptx.Deck{Slides: []pptx.Slide{{}}}, errcode.Invalid, "deck_invalid", "slide 1: image is not a PNG"},
		{"jpeg image", pptx.Deck{Slides: []pptx.Slide{{Image: img}, {Image: jpegish}}}, errcode.Invalid, "deck_invalid", "slide 2: image is not a PNG"},
		{"truncated png", pptx.Deck{Slides: []pptx.Slide{{Image: img[:20]}}}, errcode.Invalid, "deck_invalid", "slide 1: image is not a PNG"},
		{"zero width png", pptx.Deck{Slides: []pptx.Slide{{Image: zeroWidth}}}, errcode.Invalid, "deck_invalid", "slide 1: image is not a PNG"},
		{"tiny width", pptx.Deck{Width: 100, Height: 6858000, Slides: []pptx.Slide{{Image: img}}}, errcode.Invalid, "deck_invalid", "slide width 100 EMU is outside 914400..51206400"},
		{"huge height", pptx.Deck{Width: 12192000, Height: 1 << 40, Slides: []pptx.Slide{{Image: img}}}, errcode.Invalid, "deck_invalid", "slide height 1099511627776 EMU is outside"},
		{"negative", pptx.Deck{Width: -12192000, Height: -6858000, Slides: []pptx.Slide{{Image: img}}}, errcode.Invalid, "deck_invalid", "slide width -12192000 EMU"},
		{"only width", pptx.Deck{Width: 12192000, Slides: []pptx.Slide{{Image: img}}}, errcode.Invalid, "deck_invalid", "slide height 0 EMU is outside"},
		{"one past max", pptx.Deck{Width: pptx.MaxSize + 1, Height: pptx.MaxSize, Slides: []pptx.Slide{{Image: img}}}, errcode.Invalid, "deck_invalid", "slide width 51206401 EMU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			err := pptx.Write(&b, tt.deck)
			if err == nil {
				t.Fatal("Write succeeded, want an error")
			}
			if got := errcode.CodeOf(err); got != tt.code {
				t.Errorf("code = %s, want %s (%v)", got, tt.code, err)
			}
			if got := errcode.ReasonOf(err); got != tt.reason {
				t.Errorf("reason = %q, want %q", got, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error = %q, want it to contain %q", err, tt.msg)
			}
			if b.Len() != 0 {
				t.Errorf("Write wrote %d bytes for an invalid deck, want none", b.Len())
			}
		})
	}
}

// TestWriteAccepts is the positive control of TestWriteRefuses: the same
// shapes of input just inside the limits are written.
func TestWriteAccepts(t *testing.T) {
	t.Parallel()
	img := solidPNG(t, 2, 2, color.White)
	many := make([]pptx.Slide, pptx.MaxSlides)
	for i := range many {
		many[i] = pptx.Slide{Image: img}
	}
	for _, d := range []pptx.Deck{
		{Slides: many},
		{Width: pptx.MinSize, Height: pptx.MinSize, Slides: many[:1]},
		{Width: pptx.MaxSize, Height: pptx.MaxSize, Slides: many[:1]},
	} {
		out := write(t, d)
		n, err := docfmt.PPTX(bytes.NewReader(out), int64(len(out)))
		if err != nil || n != len(d.Slides) {
			t.Errorf("docfmt.PPTX of a %dx%d deck = %d, %v; want %d, nil", d.Width, d.Height, n, err, len(d.Slides))
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	t.Parallel()
	d := pptx.Deck{Title: "t", Slides: []pptx.Slide{{Image: solidPNG(t, 3, 3, color.Black), Notes: "n"}}}
	a, b := write(t, d), write(t, d)
	if !bytes.Equal(a, b) {
		t.Error("two writes of the same deck differ")
	}
}

var errBroken = errors.New("broken pipe")

// failingWriter accepts n bytes, then fails.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errBroken
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteReportsWriterErrors(t *testing.T) {
	t.Parallel()
	d := pptx.Deck{Slides: []pptx.Slide{{Image: solidPNG(t, 64, 64, color.Black), Notes: "n"}}}
	size := len(write(t, d))
	for _, n := range []int{0, 100, size / 2, size - 1} {
		err := pptx.Write(&failingWriter{n: n}, d)
		if !errors.Is(err, errBroken) {
			t.Errorf("Write to a writer failing after %d of %d bytes = %v, want %v", n, size, err, errBroken)
		}
	}
	if err := pptx.Write(&failingWriter{n: size}, d); err != nil {
		t.Errorf("Write to a writer taking exactly %d bytes = %v, want nil", size, err)
	}
}

func FuzzNotes(f *testing.F) {
	f.Add("hello\nworld")
	f.Add("<&>\"'\r\n\x00\xff")
	f.Add("\t \U0001F600\uFFFE\uFFFF\U0010FFFF")
	img := solidPNG(f, 1, 1, color.White)
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		if err := pptx.Write(&b, pptx.Deck{Title: s, Slides: []pptx.Slide{{Image: img, Notes: s}}}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		files := unzip(t, b.Bytes())
		for name, data := range files {
			if err := wellFormed(data); strings.HasSuffix(name, ".xml") && err != nil {
				t.Fatalf("%s is not well-formed for notes %q: %v", name, s, err)
			}
		}
		data, ok := files["ppt/notesSlides/notesSlide1.xml"]
		if !ok {
			return
		}
		got, _ := notesText(t, data)
		if !utf8.ValidString(got) {
			t.Errorf("notes %q came back as invalid UTF-8 %q", s, got)
		}
		// Text that needs no cleaning comes back unchanged.
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
			return r == '\r' || (r < 0x20 && r != '\t' && r != '\n') || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r < 0xE000)
		})
		if clean && got != s {
			t.Errorf("notes %q came back as %q", s, got)
		}
	})
}
