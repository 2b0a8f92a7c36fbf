package pptx

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif"  // pictures may be GIFs
	_ "image/jpeg" // or JPEGs
	"strings"

	"github.com/berthdev/berth/internal/errcode"
)

// ShapeKind says what a [Shape] is.
type ShapeKind string

// The kinds of shape.
const (
	// Rect is a rectangle, filled and/or outlined, with rounded corners
	// when Radius is set.
	Rect ShapeKind = "rect"
	// TextBox is a text box holding Paras.
	TextBox ShapeKind = "text"
	// Picture is a picture of Image (PNG, JPEG or GIF bytes).
	Picture ShapeKind = "picture"
	// TableShape is a table ([Table]).
	TableShape ShapeKind = "table"
)

// MaxShapes is the most shapes a slide may have.
const MaxShapes = 20000

// Shape is one native object of an editable slide. Positions and sizes
// are in EMU from the slide's top left corner.
type Shape struct {
	Kind       ShapeKind
	X, Y, W, H int64
	Name       string // the object's name or a picture's alt text; plain text

	// Rect: colours are "RRGGBB" hex, "" for none.
	Fill      string
	Line      string
	LineWidth int64 // EMU
	Radius    int64 // EMU, for a rounded rectangle

	// TextBox.
	Paras []Paragraph

	// Picture.
	Image []byte

	// TableShape.
	Table *Table
}

// Paragraph is one paragraph of text.
type Paragraph struct {
	Align      string // "l" (default), "ctr", "r" or "just"
	LineHeight int    // line spacing in hundredths of a point; 0 = the font's
	Bullet     string // a bullet character, or "" for none (see Numbered)
	Numbered   string // an a:buAutoNum scheme such as "arabicPeriod"; wins over Bullet
	StartAt    int    // first number of a numbered list (1 if 0)
	Indent     int64  // EMU from the box's left edge to the text (a list's)
	Level      int    // 0-8, a list's nesting
	Runs       []Run
}

// Run is a piece of text in one style. A run with Break set is a line
// break, and its Text is ignored.
type Run struct {
	Text      string
	Break     bool
	Font      string // typeface; "" for the theme's
	Size      int    // hundredths of a point; 0 for the default
	Bold      bool
	Italic    bool
	Underline bool
	Strike    bool
	Color     string // "RRGGBB"; "" for the default
}

// Table is a grid of cells. Every row lists one Cell per column of the
// grid; a cell covered by another's span has HMerge or VMerge set.
type Table struct {
	Cols []int64 // column widths, EMU
	Rows []TableRow
}

// TableRow is one row of a [Table].
type TableRow struct {
	Height int64 // EMU
	Cells  []Cell
}

// Cell is one cell of a [Table].
type Cell struct {
	Paras          []Paragraph
	Fill           string   // "RRGGBB" or ""
	Line           string   // "RRGGBB" border colour of all four sides, or ""
	LineWidth      int64    // EMU
	GridSpan       int      // columns spanned, when more than 1
	RowSpan        int      // rows spanned, when more than 1
	HMerge, VMerge bool     // covered by the span of the cell left of or above it
	Margins        [4]int64 // EMU between the cell's edges and its text: left, top, right, bottom
}

// validateShapes checks slide i's shapes.
func validateShapes(i int, s Slide) error {
	if len(s.Shapes) > MaxShapes {
		return errcode.DeckTooLarge.New("slide %d has %d shapes, more than %d", i+1, len(s.Shapes), MaxShapes)
	}
	if s.Background != "" && !isHex(s.Background) {
		return errcode.DeckInvalid.New("slide %d: background %q is not an RRGGBB colour", i+1, s.Background)
	}
	for k, sh := range s.Shapes {
		bad := func(format string, args ...any) error {
			return errcode.DeckInvalid.New("slide %d shape %d: %s", i+1, k+1, fmt.Sprintf(format, args...))
		}
		if sh.W < 0 || sh.H < 0 || abs(sh.X) > 4*MaxSize || abs(sh.Y) > 4*MaxSize || sh.W > 4*MaxSize || sh.H > 4*MaxSize {
			return bad("position or size out of range")
		}
		for _, c := range []string{sh.Fill, sh.Line} {
			if c != "" && !isHex(c) {
				return bad("colour %q is not RRGGBB", c)
			}
		}
		switch sh.Kind {
		case Rect, TextBox:
		case Picture:
			if _, ok := pictureExt(sh.Image); !ok {
				return bad("picture is not a PNG, JPEG or GIF")
			}
		case TableShape:
			if sh.Table == nil || len(sh.Table.Cols) == 0 || len(sh.Table.Rows) == 0 {
				return bad("table has no cells")
			}
			for r, row := range sh.Table.Rows {
				if len(row.Cells) != len(sh.Table.Cols) {
					return bad("table row %d has %d cells for %d columns", r+1, len(row.Cells), len(sh.Table.Cols))
				}
			}
		default:
			return bad("unknown kind %q", sh.Kind)
		}
	}
	return nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func isHex(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// pictureExt returns the file extension of a picture's format, if it is
// one every PowerPoint reader shows.
func pictureExt(b []byte) (string, bool) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width < 1 || cfg.Height < 1 {
		return "", false
	}
	switch format {
	case "png", "gif":
		return format, true
	case "jpeg":
		return "jpeg", true
	}
	return "", false
}

// IsPicture reports whether b is a picture a [Picture] shape takes: a
// PNG, JPEG or GIF whose header decodes.
func IsPicture(b []byte) bool {
	_, ok := pictureExt(b)
	return ok
}

// media is one picture part of a slide.
type media struct {
	name  string // part name under ppt/media/
	relID string
	data  []byte
}

// slideMedia names the pictures of slide n's shapes, in shape order.
func slideMedia(n int, s Slide) []media {
	var out []media
	for _, sh := range s.Shapes {
		if sh.Kind != Picture {
			continue
		}
		ext, _ := pictureExt(sh.Image)
		k := len(out) + 1
		out = append(out, media{name: fmt.Sprintf("slide%d-image%d.%s", n, k, ext), relID: fmt.Sprintf("rId%d", 100+k), data: sh.Image})
	}
	return out
}

// editableSlideXML is a slide of native shapes: its background colour,
// its full-slide picture if any (related as rId2), then the shapes in
// order, pictures related as slideMedia numbers them.
func editableSlideXML(width, height int64, s Slide) []byte {
	var b strings.Builder
	b.WriteString(xmlHeader + `<p:sld ` + pmlNS + `><p:cSld>`)
	if s.Background != "" {
		b.WriteString(`<p:bg><p:bgPr><a:solidFill><a:srgbClr val="` + strings.ToUpper(s.Background) + `"/></a:solidFill><a:effectLst/></p:bgPr></p:bg>`)
	}
	b.WriteString(`<p:spTree>` + groupHeader)
	id := 2
	if s.Image != nil {
		b.WriteString(`<p:pic><p:nvPicPr><p:cNvPr id="2" name="Background"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr>` +
			`<p:blipFill><a:blip r:embed="rId2"/><a:stretch><a:fillRect/></a:stretch></p:blipFill>` +
			`<p:spPr>` + xfrm(0, 0, width, height) + `<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>`)
		id++
	}
	pic := 0
	for _, sh := range s.Shapes {
		name := escape(cleanLine(sh.Name))
		switch sh.Kind {
		case Rect:
			fmt.Fprintf(&b, `<p:sp><p:nvSpPr><p:cNvPr id="%d" name="Shape %[1]d"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr>`, id)
			b.WriteString(xfrm(sh.X, sh.Y, sh.W, sh.H))
			if sh.Radius > 0 && sh.W > 0 && sh.H > 0 {
				adj := min(50000, sh.Radius*100000/min(sh.W, sh.H))
				fmt.Fprintf(&b, `<a:prstGeom prst="roundRect"><a:avLst><a:gd name="adj" fmla="val %d"/></a:avLst></a:prstGeom>`, adj)
			} else {
				b.WriteString(`<a:prstGeom prst="rect"><a:avLst/></a:prstGeom>`)
			}
			b.WriteString(fill(sh.Fill))
			b.WriteString(line(sh.Line, sh.LineWidth))
			b.WriteString(`</p:spPr></p:sp>`)
		case TextBox:
			fmt.Fprintf(&b, `<p:sp><p:nvSpPr><p:cNvPr id="%d" name="Text %[1]d"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr>`, id)
			b.WriteString(xfrm(sh.X, sh.Y, sh.W, sh.H))
			b.WriteString(`<a:prstGeom prst="rect"><a:avLst/></a:prstGeom><a:noFill/></p:spPr>`)
			b.WriteString(`<p:txBody><a:bodyPr wrap="square" lIns="0" tIns="0" rIns="0" bIns="0" rtlCol="0" anchor="t"><a:noAutofit/></a:bodyPr><a:lstStyle/>`)
			writeParas(&b, sh.Paras)
			b.WriteString(`</p:txBody></p:sp>`)
		case Picture:
			pic++
			fmt.Fprintf(&b, `<p:pic><p:nvPicPr><p:cNvPr id="%d" name="Picture %[1]d" descr="%s"/><p:cNvPicPr><a:picLocks noChangeAspect="1"/></p:cNvPicPr><p:nvPr/></p:nvPicPr>`, id, name)
			fmt.Fprintf(&b, `<p:blipFill><a:blip r:embed="rId%d"/><a:stretch><a:fillRect/></a:stretch></p:blipFill>`, 100+pic)
			b.WriteString(`<p:spPr>` + xfrm(sh.X, sh.Y, sh.W, sh.H) + `<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>`)
		case TableShape:
			writeTable(&b, id, sh)
		}
		id++
	}
	b.WriteString(`</p:spTree></p:cSld>` + clrMapOvr + `</p:sld>`)
	return []byte(b.String())
}

func writeTable(b *strings.Builder, id int, sh Shape) {
	fmt.Fprintf(b, `<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="%d" name="Table %[1]d"/>`+
		`<p:cNvGraphicFramePr><a:graphicFrameLocks noGrp="1"/></p:cNvGraphicFramePr><p:nvPr/></p:nvGraphicFramePr>`, id)
	fmt.Fprintf(b, `<p:xfrm><a:off x="%d" y="%d"/><a:ext cx="%d" cy="%d"/></p:xfrm>`, sh.X, sh.Y, sh.W, sh.H)
	b.WriteString(`<a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/table"><a:tbl><a:tblPr firstRow="0" bandRow="0"/><a:tblGrid>`)
	for _, w := range sh.Table.Cols {
		fmt.Fprintf(b, `<a:gridCol w="%d"/>`, max(w, 1))
	}
	b.WriteString(`</a:tblGrid>`)
	for _, row := range sh.Table.Rows {
		fmt.Fprintf(b, `<a:tr h="%d">`, max(row.Height, 1))
		for _, c := range row.Cells {
			b.WriteString(`<a:tc`)
			if c.GridSpan > 1 {
				fmt.Fprintf(b, ` gridSpan="%d"`, c.GridSpan)
			}
			if c.RowSpan > 1 {
				fmt.Fprintf(b, ` rowSpan="%d"`, c.RowSpan)
			}
			if c.HMerge {
				b.WriteString(` hMerge="1"`)
			}
			if c.VMerge {
				b.WriteString(` vMerge="1"`)
			}
			b.WriteString(`><a:txBody><a:bodyPr/><a:lstStyle/>`)
			writeParas(b, c.Paras)
			m := c.Margins
			fmt.Fprintf(b, `</a:txBody><a:tcPr marL="%d" marR="%d" marT="%d" marB="%d">`, max(m[0], 0), max(m[2], 0), max(m[1], 0), max(m[3], 0))
			for _, side := range []string{"lnL", "lnR", "lnT", "lnB"} {
				if c.Line != "" && c.LineWidth > 0 {
					fmt.Fprintf(b, `<a:%s w="%d"><a:solidFill><a:srgbClr val="%s"/></a:solidFill></a:%[1]s>`, side, c.LineWidth, strings.ToUpper(c.Line))
				} else {
					fmt.Fprintf(b, `<a:%s w="0"><a:noFill/></a:%[1]s>`, side)
				}
			}
			b.WriteString(fill(c.Fill))
			b.WriteString(`</a:tcPr></a:tc>`)
		}
		b.WriteString(`</a:tr>`)
	}
	b.WriteString(`</a:tbl></a:graphicData></a:graphic></p:graphicFrame>`)
}

// writeParas writes paragraphs; a text body needs at least one.
func writeParas(b *strings.Builder, paras []Paragraph) {
	if len(paras) == 0 {
		b.WriteString(`<a:p><a:endParaRPr lang="en-US"/></a:p>`)
		return
	}
	for _, p := range paras {
		b.WriteString(`<a:p><a:pPr`)
		if p.Indent > 0 {
			fmt.Fprintf(b, ` marL="%d" indent="%d"`, p.Indent, -min(p.Indent, 228600))
		} else {
			b.WriteString(` marL="0" indent="0"`)
		}
		if p.Level > 0 {
			fmt.Fprintf(b, ` lvl="%d"`, min(p.Level, 8))
		}
		switch p.Align {
		case "ctr", "r", "just":
			fmt.Fprintf(b, ` algn="%s"`, p.Align)
		default:
			b.WriteString(` algn="l"`)
		}
		b.WriteString(`>`)
		if p.LineHeight > 0 {
			fmt.Fprintf(b, `<a:lnSpc><a:spcPts val="%d"/></a:lnSpc>`, min(p.LineHeight, 158400))
		}
		b.WriteString(`<a:spcBef><a:spcPts val="0"/></a:spcBef><a:spcAft><a:spcPts val="0"/></a:spcAft>`)
		switch {
		case p.Numbered != "":
			fmt.Fprintf(b, `<a:buFontTx/><a:buAutoNum type="%s" startAt="%d"/>`, escape(p.Numbered), max(p.StartAt, 1))
		case p.Bullet != "":
			fmt.Fprintf(b, `<a:buFont typeface="Arial"/><a:buChar char="%s"/>`, escape(cleanLine(p.Bullet)))
		default:
			b.WriteString(`<a:buNone/>`)
		}
		b.WriteString(`</a:pPr>`)
		var last Run
		for _, r := range p.Runs {
			if r.Break {
				b.WriteString(`<a:br>` + rPr(r, "a:rPr") + `</a:br>`)
				continue
			}
			t := cleanLine(r.Text)
			if t == "" {
				continue
			}
			b.WriteString(`<a:r>` + rPr(r, "a:rPr") + `<a:t>` + escape(t) + `</a:t></a:r>`)
			last = r
		}
		b.WriteString(rPr(last, "a:endParaRPr") + `</a:p>`)
	}
}

// rPr is a run's properties as element tag.
func rPr(r Run, tag string) string {
	var b strings.Builder
	b.WriteString(`<` + tag + ` lang="en-US"`)
	if r.Size > 0 {
		fmt.Fprintf(&b, ` sz="%d"`, min(max(r.Size, 100), 400000))
	}
	if r.Bold {
		b.WriteString(` b="1"`)
	}
	if r.Italic {
		b.WriteString(` i="1"`)
	}
	if r.Underline {
		b.WriteString(` u="sng"`)
	}
	if r.Strike {
		b.WriteString(` strike="sngStrike"`)
	}
	b.WriteString(` dirty="0">`)
	if r.Color != "" && isHex(r.Color) {
		b.WriteString(`<a:solidFill><a:srgbClr val="` + strings.ToUpper(r.Color) + `"/></a:solidFill>`)
	}
	if f := cleanLine(r.Font); f != "" {
		f = escape(truncate(f, 128))
		b.WriteString(`<a:latin typeface="` + f + `"/><a:ea typeface="` + f + `"/><a:cs typeface="` + f + `"/>`)
	}
	b.WriteString(`</` + tag + `>`)
	return b.String()
}

func fill(c string) string {
	if c == "" {
		return `<a:noFill/>`
	}
	return `<a:solidFill><a:srgbClr val="` + strings.ToUpper(c) + `"/></a:solidFill>`
}

func line(c string, w int64) string {
	if c == "" || w <= 0 {
		return `<a:ln><a:noFill/></a:ln>`
	}
	return fmt.Sprintf(`<a:ln w="%d"><a:solidFill><a:srgbClr val="%s"/></a:solidFill></a:ln>`, min(w, 20116800), strings.ToUpper(c))
}

// cleanLine is cleanText on one line: line ends become spaces, and tabs
// stay.
func cleanLine(s string) string {
	return strings.ReplaceAll(cleanText(s), "\n", " ")
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
