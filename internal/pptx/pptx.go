package pptx

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berthdev/berth/internal/errcode"
)

// Sizes in EMU (English Metric Units): 914400 per inch, 12700 per point.
const (
	// DefaultWidth and DefaultHeight are the 16:9 widescreen slide size
	// PowerPoint uses for new presentations (13.333 x 7.5 inches).
	DefaultWidth  = 12192000
	DefaultHeight = 6858000

	// MinSize and MaxSize bound a slide's width and height: PowerPoint
	// accepts 1 to 56 inches.
	MinSize = 914400
	MaxSize = 51206400

	// MaxSlides is the most slides a deck may have.
	MaxSlides = 1000

	// The notes page is US Letter portrait, as PowerPoint's default.
	notesWidth  = 6858000
	notesHeight = 9144000
)

// Deck is a presentation of picture slides.
type Deck struct {
	Width, Height int64 // slide size in EMU (914400 per inch; 12700 per point); 16:9 default 12192000 x 6858000
	Slides        []Slide
	Title         string // optional, docProps/core.xml dc:title
}

// Slide is one slide: a picture stretched over the whole slide, or, when
// it has Shapes or a Background, an editable slide of native objects drawn
// over its optional full-slide picture.
type Slide struct {
	Image []byte // PNG bytes, shown stretched to the full slide
	Notes string // speaker notes (plain text, newlines = paragraphs); "" = no notes slide

	// Editable slides.
	Background string  // "RRGGBB" background colour; "" for the theme's (white)
	Shapes     []Shape // drawn in order, over Image
}

// editable reports whether s is a slide of native objects.
func (s Slide) editable() bool { return len(s.Shapes) > 0 || s.Background != "" }

// zipTime is the modification time of every entry, fixed so that output is
// deterministic. It is the earliest time a zip (MS-DOS) date can hold.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Write validates d and writes it to w as a .pptx (a zip package).
//
// A Width and Height of zero select [DefaultWidth] x [DefaultHeight];
// otherwise both must lie within [MinSize]..[MaxSize]. There must be 1 to
// [MaxSlides] slides, and every image must be a PNG whose header decodes.
// Notes and Title are plain text: characters XML 1.0 cannot carry (most
// control characters, invalid UTF-8) are dropped, "\r\n" and "\r" count as
// newlines, and each line becomes a paragraph. A slide whose notes are empty
// after that gets no notes slide.
//
// When d is invalid Write returns an [errcode] error and writes nothing. An
// error from w is returned wrapped and leaves w with a partial zip. Write
// only reads d, so concurrent calls, even with the same images, are safe.
func Write(w io.Writer, d Deck) error {
	width, height, err := validate(d)
	if err != nil {
		return err
	}
	notes := make([]string, len(d.Slides))
	anyNotes := false
	for i, s := range d.Slides {
		notes[i] = cleanText(s.Notes)
		if notes[i] != "" {
			anyNotes = true
		}
	}

	p := &pkg{zw: zip.NewWriter(w)}
	p.add("[Content_Types].xml", contentTypes(len(d.Slides), notes))
	p.add("_rels/.rels", rootRels)
	p.add("docProps/app.xml", appXML(len(d.Slides), notes))
	p.add("docProps/core.xml", coreXML(cleanText(d.Title)))
	p.add("ppt/presentation.xml", presentationXML(width, height, len(d.Slides), anyNotes))
	p.add("ppt/_rels/presentation.xml.rels", presentationRels(len(d.Slides), anyNotes))
	p.add("ppt/presProps.xml", presPropsXML)
	p.add("ppt/viewProps.xml", viewPropsXML)
	p.add("ppt/tableStyles.xml", tableStylesXML)
	p.add("ppt/theme/theme1.xml", themeXML)
	p.add("ppt/slideMasters/slideMaster1.xml", slideMasterXML)
	p.add("ppt/slideMasters/_rels/slideMaster1.xml.rels", slideMasterRels)
	p.add("ppt/slideLayouts/slideLayout1.xml", slideLayoutXML)
	p.add("ppt/slideLayouts/_rels/slideLayout1.xml.rels", slideLayoutRels)
	if anyNotes {
		p.add("ppt/notesMasters/notesMaster1.xml", notesMasterXML(width, height))
		p.add("ppt/notesMasters/_rels/notesMaster1.xml.rels", notesMasterRels)
		p.add("ppt/theme/theme2.xml", themeXML)
	}
	for i, s := range d.Slides {
		n := i + 1
		if s.editable() {
			ms := slideMedia(n, s)
			p.add(fmt.Sprintf("ppt/slides/slide%d.xml", n), editableSlideXML(width, height, s))
			p.add(fmt.Sprintf("ppt/slides/_rels/slide%d.xml.rels", n), editableSlideRels(n, s.Image != nil, notes[i] != "", ms))
			if s.Image != nil {
				p.add(fmt.Sprintf("ppt/media/image%d.png", n), s.Image)
			}
			for _, m := range ms {
				p.add("ppt/media/"+m.name, m.data)
			}
		} else {
			p.add(fmt.Sprintf("ppt/slides/slide%d.xml", n), slideXML(width, height))
			p.add(fmt.Sprintf("ppt/slides/_rels/slide%d.xml.rels", n), slideRels(n, notes[i] != ""))
			p.add(fmt.Sprintf("ppt/media/image%d.png", n), s.Image)
		}
		if notes[i] != "" {
			p.add(fmt.Sprintf("ppt/notesSlides/notesSlide%d.xml", n), notesSlideXML(notes[i]))
			p.add(fmt.Sprintf("ppt/notesSlides/_rels/notesSlide%d.xml.rels", n), notesSlideRels(n))
		}
	}
	if p.err != nil {
		return p.err
	}
	if err := p.zw.Close(); err != nil {
		return fmt.Errorf("writing pptx: %w", err)
	}
	return nil
}

// validate checks d and returns the slide size to use.
func validate(d Deck) (width, height int64, err error) {
	switch {
	case len(d.Slides) == 0:
		return 0, 0, errcode.DeckInvalid.New("deck has no slides")
	case len(d.Slides) > MaxSlides:
		return 0, 0, errcode.DeckTooLarge.New("deck has %d slides, more than %d", len(d.Slides), MaxSlides)
	}
	width, height = d.Width, d.Height
	if width == 0 && height == 0 {
		width, height = DefaultWidth, DefaultHeight
	}
	for _, side := range []struct {
		name string
		v    int64
	}{{"width", width}, {"height", height}} {
		if side.v < MinSize || side.v > MaxSize {
			return 0, 0, errcode.DeckInvalid.New("slide %s %d EMU is outside %d..%d (1 to 56 inches)", side.name, side.v, MinSize, MaxSize)
		}
	}
	for i, s := range d.Slides {
		if s.editable() && s.Image == nil {
			// An editable slide's picture is optional.
		} else if _, err := png.DecodeConfig(bytes.NewReader(s.Image)); err != nil {
			return 0, 0, errcode.DeckInvalid.New("slide %d: image is not a PNG: %v", i+1, err)
		}
		if err := validateShapes(i, s); err != nil {
			return 0, 0, err
		}
	}
	return width, height, nil
}

// pkg writes zip entries and keeps the first error.
type pkg struct {
	zw  *zip.Writer
	err error
}

// add writes one entry, compressed unless it is a PNG: PNG data is
// compressed already.
func (p *pkg) add(name string, data []byte) {
	if p.err != nil {
		return
	}
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: zipTime}
	if ext := path.Ext(name); ext == ".png" || ext == ".jpeg" || ext == ".gif" {
		h.Method = zip.Store
	}
	f, err := p.zw.CreateHeader(h)
	if err == nil {
		_, err = f.Write(data)
	}
	if err != nil {
		p.err = fmt.Errorf("writing %s: %w", name, err)
	}
}

// cleanText makes s safe to carry in XML 1.0: invalid UTF-8 and characters
// outside XML's Char production are dropped, and line ends become "\n".
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Map(func(r rune) rune {
		if isXMLChar(r) {
			return r
		}
		return -1
	}, s)
}

// isXMLChar reports whether r matches the Char production of XML 1.0.
func isXMLChar(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return true
	case r >= 0x20 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	case r >= 0x10000 && r <= utf8.MaxRune:
		return true
	}
	return false
}

// escape returns s escaped for XML character data or attribute values.
func escape(s string) string {
	var b strings.Builder
	// EscapeText only fails if the writer does; strings.Builder does not.
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
