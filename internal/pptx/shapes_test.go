package pptx_test

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/pptx"
)

// TestWriteEditable writes an editable slide of every kind of shape, with
// hostile text, and checks the package (content types, relationships,
// well-formed parts) and the escaping; a slide with a bad shape is
// refused.
func TestWriteEditable(t *testing.T) {
	t.Parallel()
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 4, 4)), nil); err != nil {
		t.Fatal(err)
	}
	hostile := "<script>alert(1)</script> & \x01\x1f\"quotes\" ]]> " + strings.Repeat("long ", 10000)
	run := pptx.Run{Text: hostile, Font: `Evil" onload="x`, Size: 2400, Bold: true, Color: "c0392b"}
	table := &pptx.Table{Cols: []int64{914400, 914400}, Rows: []pptx.TableRow{
		{Height: 370840, Cells: []pptx.Cell{{Paras: []pptx.Paragraph{{Runs: []pptx.Run{{Text: "Region & <b>"}}}}, Fill: "eeeeee"}, {}}},
		{Height: 370840, Cells: []pptx.Cell{{GridSpan: 2, Paras: []pptx.Paragraph{{Runs: []pptx.Run{{Text: "Total"}}}}}, {HMerge: true}}},
	}}
	slide := pptx.Slide{Background: "fdf6e3", Notes: "notes <too>", Shapes: []pptx.Shape{
		{Kind: pptx.Rect, X: 10, Y: 20, W: 300, H: 400, Fill: "2255aa", Line: "ff8800", LineWidth: 38100, Radius: 50},
		{Kind: pptx.TextBox, X: 1, Y: 2, W: 3, H: 4, Paras: []pptx.Paragraph{{Align: "ctr", Runs: []pptx.Run{run, {Break: true}, {Text: "next"}}},
			{Bullet: "•", Indent: 342900, Runs: []pptx.Run{{Text: "item"}}}, {Numbered: "arabicPeriod", Level: 1, Runs: []pptx.Run{{Text: "one"}}}}},
		{Kind: pptx.Picture, X: 5, Y: 6, W: 7, H: 8, Image: solidPNG(t, 2, 2, color.White), Name: `a "<red>" & square`},
		{Kind: pptx.Picture, Image: jpg.Bytes()},
		{Kind: pptx.TableShape, W: 1828800, H: 741680, Table: table},
	}}
	files := unzip(t, write(t, pptx.Deck{Slides: []pptx.Slide{slide, {Image: solidPNG(t, 2, 2, color.Black)}}}))
	checkPackage(t, files)
	s := string(files["ppt/slides/slide1.xml"])
	for _, want := range []string{
		`<p:bg><p:bgPr><a:solidFill><a:srgbClr val="FDF6E3"/>`,
		`<a:off x="10" y="20"/><a:ext cx="300" cy="400"/>`, `<a:gd name="adj" fmla="val 16666"/>`, `<a:ln w="38100">`,
		`<a:t>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;quotes&#34; ]]&gt; long long`,
		`typeface="Evil&#34; onload=&#34;x"`, `sz="2400" b="1"`, `<a:srgbClr val="C0392B"/>`, `<a:br>`,
		`<a:buChar char="•"/>`, `<a:buAutoNum type="arabicPeriod" startAt="1"/>`, `lvl="1"`,
		`descr="a &#34;&lt;red&gt;&#34; &amp; square"`, `r:embed="rId101"`, `r:embed="rId102"`,
		`<a:t>Region &amp; &lt;b&gt;</a:t>`, `gridSpan="2"`, `hMerge="1"`, `<a:srgbClr val="EEEEEE"/>`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("slide 1 lacks %s", want)
		}
	}
	if strings.ContainsAny(s, "\x01\x1f") || strings.Count(s, "long ") < 9999 {
		t.Errorf("slide 1's text is not cleaned, or not kept whole")
	}
	if _, ok := files["ppt/media/slide1-image2.jpeg"]; !ok {
		t.Errorf("no JPEG picture part")
	}
	if _, ok := files["ppt/media/image1.png"]; ok {
		t.Errorf("an editable slide with no picture has a whole-slide picture")
	}
	if _, ok := files["ppt/media/image2.png"]; !ok {
		t.Errorf("the picture slide after it lost its picture")
	}

	for name, bad := range map[string]pptx.Shape{
		"picture is not a PNG, JPEG or GIF": {Kind: pptx.Picture, Image: []byte("<svg/>")},
		`colour "red" is not RRGGBB`:        {Kind: pptx.Rect, Fill: "red"},
		"table row 1 has 1 cells":           {Kind: pptx.TableShape, Table: &pptx.Table{Cols: []int64{1, 1}, Rows: []pptx.TableRow{{Cells: []pptx.Cell{{}}}}}},
		`unknown kind "blob"`:               {Kind: "blob"},
		"position or size out of range":     {Kind: pptx.Rect, W: -1},
	} {
		err := pptx.Write(&bytes.Buffer{}, pptx.Deck{Slides: []pptx.Slide{{Background: "ffffff", Shapes: []pptx.Shape{bad}}}})
		var e *errcode.Error
		if !errors.As(err, &e) || e.Reason != "deck_invalid" || !strings.Contains(err.Error(), name) {
			t.Errorf("shape %+v: Write = %v, want deck_invalid %q", bad.Kind, err, name)
		}
	}
}
