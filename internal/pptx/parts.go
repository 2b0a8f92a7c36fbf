package pptx

import (
	"fmt"
	"strings"
)

// The XML of each part. PresentationML is order-sensitive: child elements
// follow the schema's sequence, or PowerPoint reports the file as damaged.

const xmlHeader = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"

// Namespaces.
const (
	nsA   = `http://schemas.openxmlformats.org/drawingml/2006/main`
	nsR   = `http://schemas.openxmlformats.org/officeDocument/2006/relationships`
	nsP   = `http://schemas.openxmlformats.org/presentationml/2006/main`
	nsRel = `http://schemas.openxmlformats.org/package/2006/relationships`
	nsCT  = `http://schemas.openxmlformats.org/package/2006/content-types`

	// pmlNS declares the namespaces of every PresentationML root element.
	pmlNS = `xmlns:a="` + nsA + `" xmlns:r="` + nsR + `" xmlns:p="` + nsP + `"`
)

// Relationship types.
const (
	relOfficeDoc   = nsR + "/officeDocument"
	relCore        = "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"
	relApp         = nsR + "/extended-properties"
	relSlideMaster = nsR + "/slideMaster"
	relSlideLayout = nsR + "/slideLayout"
	relSlide       = nsR + "/slide"
	relNotesMaster = nsR + "/notesMaster"
	relNotesSlide  = nsR + "/notesSlide"
	relTheme       = nsR + "/theme"
	relImage       = nsR + "/image"
	relPresProps   = nsR + "/presProps"
	relViewProps   = nsR + "/viewProps"
	relTableStyles = nsR + "/tableStyles"
)

// Content types.
const (
	ctPML          = "application/vnd.openxmlformats-officedocument.presentationml."
	ctPresentation = ctPML + "presentation.main+xml"
	ctSlide        = ctPML + "slide+xml"
	ctSlideMaster  = ctPML + "slideMaster+xml"
	ctSlideLayout  = ctPML + "slideLayout+xml"
	ctNotesMaster  = ctPML + "notesMaster+xml"
	ctNotesSlide   = ctPML + "notesSlide+xml"
	ctPresProps    = ctPML + "presProps+xml"
	ctViewProps    = ctPML + "viewProps+xml"
	ctTableStyles  = ctPML + "tableStyles+xml"
	ctTheme        = "application/vnd.openxmlformats-officedocument.theme+xml"
	ctCore         = "application/vnd.openxmlformats-package.core-properties+xml"
	ctApp          = "application/vnd.openxmlformats-officedocument.extended-properties+xml"
	ctRels         = "application/vnd.openxmlformats-package.relationships+xml"
)

// IDs. Slide IDs start at 256; master and layout IDs share one space from
// 2^31 up.
const (
	firstSlideID  = 256
	slideMasterID = 2147483648
	slideLayoutID = 2147483649
)

// rel is one relationship of a part.
type rel struct {
	id, typ, target string
}

func rels(rs ...rel) []byte {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<Relationships xmlns="` + nsRel + `">`)
	for _, r := range rs {
		fmt.Fprintf(&b, `<Relationship Id="%s" Type="%s" Target="%s"/>`, r.id, r.typ, escape(r.target))
	}
	b.WriteString(`</Relationships>`)
	return []byte(b.String())
}

func contentTypes(slides int, notes []string) []byte {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<Types xmlns="` + nsCT + `">`)
	b.WriteString(`<Default Extension="png" ContentType="image/png"/>`)
	b.WriteString(`<Default Extension="jpeg" ContentType="image/jpeg"/>`)
	b.WriteString(`<Default Extension="gif" ContentType="image/gif"/>`)
	b.WriteString(`<Default Extension="rels" ContentType="` + ctRels + `"/>`)
	b.WriteString(`<Default Extension="xml" ContentType="application/xml"/>`)
	over := func(part, ct string) {
		fmt.Fprintf(&b, `<Override PartName="/%s" ContentType="%s"/>`, part, ct)
	}
	over("docProps/app.xml", ctApp)
	over("docProps/core.xml", ctCore)
	over("ppt/presentation.xml", ctPresentation)
	over("ppt/presProps.xml", ctPresProps)
	over("ppt/viewProps.xml", ctViewProps)
	over("ppt/tableStyles.xml", ctTableStyles)
	over("ppt/theme/theme1.xml", ctTheme)
	over("ppt/slideMasters/slideMaster1.xml", ctSlideMaster)
	over("ppt/slideLayouts/slideLayout1.xml", ctSlideLayout)
	if hasNotes(notes) {
		over("ppt/notesMasters/notesMaster1.xml", ctNotesMaster)
		over("ppt/theme/theme2.xml", ctTheme)
	}
	for i := 1; i <= slides; i++ {
		over(fmt.Sprintf("ppt/slides/slide%d.xml", i), ctSlide)
		if notes[i-1] != "" {
			over(fmt.Sprintf("ppt/notesSlides/notesSlide%d.xml", i), ctNotesSlide)
		}
	}
	b.WriteString(`</Types>`)
	return []byte(b.String())
}

func hasNotes(notes []string) bool {
	for _, n := range notes {
		if n != "" {
			return true
		}
	}
	return false
}

var rootRels = rels(
	rel{"rId1", relOfficeDoc, "ppt/presentation.xml"},
	rel{"rId2", relCore, "docProps/core.xml"},
	rel{"rId3", relApp, "docProps/app.xml"},
)

func appXML(slides int, notes []string) []byte {
	n := 0
	for _, s := range notes {
		if s != "" {
			n++
		}
	}
	return []byte(xmlHeader + `<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"` +
		` xmlns:vt="http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes">` +
		`<Application>Berth</Application>` +
		fmt.Sprintf(`<Slides>%d</Slides><Notes>%d</Notes><HiddenSlides>0</HiddenSlides>`, slides, n) +
		`</Properties>`)
}

func coreXML(title string) []byte {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties"` +
		` xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/"` +
		` xmlns:dcmitype="http://purl.org/dc/dcmitype/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`)
	if title != "" {
		b.WriteString(`<dc:title>` + escape(title) + `</dc:title>`)
	}
	b.WriteString(`</cp:coreProperties>`)
	return []byte(b.String())
}

// presentationRels relates, in order: the master (rId1), the slides
// (rId2..), then the notes master if any, the theme and the property parts.
// presentationXML uses the same numbering.
func presentationRels(slides int, anyNotes bool) []byte {
	rs := []rel{{"rId1", relSlideMaster, "slideMasters/slideMaster1.xml"}}
	for i := 1; i <= slides; i++ {
		rs = append(rs, rel{fmt.Sprintf("rId%d", i+1), relSlide, fmt.Sprintf("slides/slide%d.xml", i)})
	}
	next := slides + 2
	add := func(typ, target string) {
		rs = append(rs, rel{fmt.Sprintf("rId%d", next), typ, target})
		next++
	}
	if anyNotes {
		add(relNotesMaster, "notesMasters/notesMaster1.xml")
	}
	add(relTheme, "theme/theme1.xml")
	add(relPresProps, "presProps.xml")
	add(relViewProps, "viewProps.xml")
	add(relTableStyles, "tableStyles.xml")
	return rels(rs...)
}

func presentationXML(width, height int64, slides int, anyNotes bool) []byte {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<p:presentation ` + pmlNS + ` saveSubsetFonts="1">`)
	fmt.Fprintf(&b, `<p:sldMasterIdLst><p:sldMasterId id="%d" r:id="rId1"/></p:sldMasterIdLst>`, slideMasterID)
	if anyNotes {
		fmt.Fprintf(&b, `<p:notesMasterIdLst><p:notesMasterId r:id="rId%d"/></p:notesMasterIdLst>`, slides+2)
	}
	b.WriteString(`<p:sldIdLst>`)
	for i := 1; i <= slides; i++ {
		fmt.Fprintf(&b, `<p:sldId id="%d" r:id="rId%d"/>`, firstSlideID+i-1, i+1)
	}
	b.WriteString(`</p:sldIdLst>`)
	fmt.Fprintf(&b, `<p:sldSz cx="%d" cy="%d"/><p:notesSz cx="%d" cy="%d"/>`, width, height, notesWidth, notesHeight)
	b.WriteString(`</p:presentation>`)
	return []byte(b.String())
}

var presPropsXML = []byte(xmlHeader + `<p:presentationPr ` + pmlNS + `/>`)

var viewPropsXML = []byte(xmlHeader + `<p:viewPr ` + pmlNS + `>` +
	`<p:normalViewPr><p:restoredLeft sz="15620"/><p:restoredTop sz="94660"/></p:normalViewPr>` +
	`<p:gridSpacing cx="76200" cy="76200"/></p:viewPr>`)

// tableStylesXML names PowerPoint's built-in "Medium Style 2 - Accent 1" as
// the default table style, as PowerPoint itself writes.
var tableStylesXML = []byte(xmlHeader + `<a:tblStyleLst xmlns:a="` + nsA + `" def="{5C22544A-7EE6-4342-B048-85BDC9FD1C3A}"/>`)

// Shared fragments.
const (
	// groupHeader opens a shape tree: the group's own non-visual and
	// visual properties, which every spTree starts with.
	groupHeader = `<p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr>` +
		`<p:grpSpPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="0" cy="0"/>` +
		`<a:chOff x="0" y="0"/><a:chExt cx="0" cy="0"/></a:xfrm></p:grpSpPr>`

	clrMap = `<p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2"` +
		` accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/>`

	clrMapOvr = `<p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr>`

	background = `<p:bg><p:bgRef idx="1001"><a:schemeClr val="bg1"/></p:bgRef></p:bg>`
)

// defRPr is a default run style of size sz (hundredths of a point) in the
// theme's major ("mj") or minor ("mn") font.
func defRPr(sz int, font string) string {
	return fmt.Sprintf(`<a:defRPr sz="%d" kern="1200"><a:solidFill><a:schemeClr val="tx1"/></a:solidFill>`+
		`<a:latin typeface="+%[2]s-lt"/><a:ea typeface="+%[2]s-ea"/><a:cs typeface="+%[2]s-cs"/></a:defRPr>`, sz, font)
}

var slideMasterXML = []byte(xmlHeader + `<p:sldMaster ` + pmlNS + `>` +
	`<p:cSld>` + background + `<p:spTree>` + groupHeader + `</p:spTree></p:cSld>` +
	clrMap +
	fmt.Sprintf(`<p:sldLayoutIdLst><p:sldLayoutId id="%d" r:id="rId1"/></p:sldLayoutIdLst>`, slideLayoutID) +
	`<p:txStyles>` +
	`<p:titleStyle><a:lvl1pPr algn="l" defTabSz="914400" rtl="0" eaLnBrk="1" latinLnBrk="0" hangingPunct="1">` +
	`<a:lnSpc><a:spcPct val="90000"/></a:lnSpc><a:spcBef><a:spcPct val="0"/></a:spcBef><a:buNone/>` +
	defRPr(4400, "mj") + `</a:lvl1pPr></p:titleStyle>` +
	`<p:bodyStyle><a:lvl1pPr marL="0" indent="0" algn="l" defTabSz="914400" rtl="0" eaLnBrk="1" latinLnBrk="0" hangingPunct="1">` +
	`<a:lnSpc><a:spcPct val="90000"/></a:lnSpc><a:spcBef><a:spcPts val="1000"/></a:spcBef><a:buNone/>` +
	defRPr(2800, "mn") + `</a:lvl1pPr></p:bodyStyle>` +
	`<p:otherStyle><a:defPPr><a:defRPr lang="en-US"/></a:defPPr>` +
	`<a:lvl1pPr marL="0" algn="l" defTabSz="914400" rtl="0" eaLnBrk="1" latinLnBrk="0" hangingPunct="1">` +
	defRPr(1800, "mn") + `</a:lvl1pPr></p:otherStyle>` +
	`</p:txStyles></p:sldMaster>`)

var slideMasterRels = rels(
	rel{"rId1", relSlideLayout, "../slideLayouts/slideLayout1.xml"},
	rel{"rId2", relTheme, "../theme/theme1.xml"},
)

var slideLayoutXML = []byte(xmlHeader + `<p:sldLayout ` + pmlNS + ` type="blank" preserve="1">` +
	`<p:cSld name="Blank"><p:spTree>` + groupHeader + `</p:spTree></p:cSld>` +
	clrMapOvr + `</p:sldLayout>`)

var slideLayoutRels = rels(rel{"rId1", relSlideMaster, "../slideMasters/slideMaster1.xml"})

// slideXML is a slide holding one picture, related as rId2, that covers it.
func slideXML(width, height int64) []byte {
	return []byte(xmlHeader + `<p:sld ` + pmlNS + `>` +
		`<p:cSld><p:spTree>` + groupHeader +
		`<p:pic><p:nvPicPr><p:cNvPr id="2" name="Picture 1"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr>` +
		`<p:blipFill><a:blip r:embed="rId2"/><a:stretch><a:fillRect/></a:stretch></p:blipFill>` +
		`<p:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="` + itoa(width) + `" cy="` + itoa(height) + `"/></a:xfrm>` +
		`<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>` +
		`</p:spTree></p:cSld>` + clrMapOvr + `</p:sld>`)
}

func slideRels(n int, notes bool) []byte {
	rs := []rel{
		{"rId1", relSlideLayout, "../slideLayouts/slideLayout1.xml"},
		{"rId2", relImage, fmt.Sprintf("../media/image%d.png", n)},
	}
	if notes {
		rs = append(rs, rel{"rId3", relNotesSlide, fmt.Sprintf("../notesSlides/notesSlide%d.xml", n)})
	}
	return rels(rs...)
}

// editableSlideRels relates an editable slide's layout (rId1), its
// full-slide picture if any (rId2), its notes if any (rId3) and its
// shapes' pictures.
func editableSlideRels(n int, image, notes bool, ms []media) []byte {
	rs := []rel{{"rId1", relSlideLayout, "../slideLayouts/slideLayout1.xml"}}
	if image {
		rs = append(rs, rel{"rId2", relImage, fmt.Sprintf("../media/image%d.png", n)})
	}
	if notes {
		rs = append(rs, rel{"rId3", relNotesSlide, fmt.Sprintf("../notesSlides/notesSlide%d.xml", n)})
	}
	for _, m := range ms {
		rs = append(rs, rel{m.relID, relImage, "../media/" + m.name})
	}
	return rels(rs...)
}

// notesMasterXML lays out the notes page: the slide's image at the top,
// scaled to the slide's aspect ratio, and the notes text below it.
func notesMasterXML(width, height int64) []byte {
	const (
		margin  = 685800  // 0.75 inch
		gap     = 228600  // 0.25 inch
		maxImgW = 5486400 // 6 inches
		maxImgH = 4114800 // 4.5 inches
	)
	imgW := int64(maxImgW)
	imgH := imgW * height / width
	if imgH > maxImgH {
		imgH = maxImgH
		imgW = imgH * width / height
	}
	imgX := (notesWidth - imgW) / 2
	bodyY := margin + imgH + gap
	return []byte(xmlHeader + `<p:notesMaster ` + pmlNS + `>` +
		`<p:cSld>` + background + `<p:spTree>` + groupHeader +
		`<p:sp><p:nvSpPr><p:cNvPr id="2" name="Slide Image Placeholder 1"/>` +
		`<p:cNvSpPr><a:spLocks noGrp="1" noRot="1" noChangeAspect="1"/></p:cNvSpPr><p:nvPr><p:ph type="sldImg"/></p:nvPr></p:nvSpPr>` +
		`<p:spPr>` + xfrm(imgX, margin, imgW, imgH) + `<a:prstGeom prst="rect"><a:avLst/></a:prstGeom><a:noFill/>` +
		`<a:ln w="12700"><a:solidFill><a:prstClr val="black"/></a:solidFill></a:ln></p:spPr></p:sp>` +
		`<p:sp><p:nvSpPr><p:cNvPr id="3" name="Notes Placeholder 2"/>` +
		`<p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr><p:ph type="body" sz="quarter" idx="1"/></p:nvPr></p:nvSpPr>` +
		`<p:spPr>` + xfrm(margin, bodyY, notesWidth-2*margin, notesHeight-margin-bodyY) +
		`<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>` +
		`<p:txBody><a:bodyPr vert="horz" lIns="91440" tIns="45720" rIns="91440" bIns="45720" rtlCol="0"/><a:lstStyle/>` +
		`<a:p><a:endParaRPr lang="en-US"/></a:p></p:txBody></p:sp>` +
		`</p:spTree></p:cSld>` + clrMap +
		`<p:notesStyle><a:lvl1pPr marL="0" algn="l" defTabSz="914400" rtl="0" eaLnBrk="1" latinLnBrk="0" hangingPunct="1">` +
		defRPr(1200, "mn") + `</a:lvl1pPr></p:notesStyle>` +
		`</p:notesMaster>`)
}

func xfrm(x, y, cx, cy int64) string {
	return fmt.Sprintf(`<a:xfrm><a:off x="%d" y="%d"/><a:ext cx="%d" cy="%d"/></a:xfrm>`, x, y, cx, cy)
}

var notesMasterRels = rels(rel{"rId1", relTheme, "../theme/theme2.xml"})

// notesSlideXML holds text, already cleaned, one paragraph per line. Its
// placeholders take their position from the notes master.
func notesSlideXML(text string) []byte {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<p:notes ` + pmlNS + `><p:cSld><p:spTree>` + groupHeader)
	b.WriteString(`<p:sp><p:nvSpPr><p:cNvPr id="2" name="Slide Image Placeholder 1"/>` +
		`<p:cNvSpPr><a:spLocks noGrp="1" noRot="1" noChangeAspect="1"/></p:cNvSpPr><p:nvPr><p:ph type="sldImg"/></p:nvPr></p:nvSpPr>` +
		`<p:spPr/></p:sp>`)
	b.WriteString(`<p:sp><p:nvSpPr><p:cNvPr id="3" name="Notes Placeholder 2"/>` +
		`<p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr><p:ph type="body" idx="1"/></p:nvPr></p:nvSpPr>` +
		`<p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/>`)
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			b.WriteString(`<a:p><a:endParaRPr lang="en-US"/></a:p>`)
			continue
		}
		b.WriteString(`<a:p><a:r><a:t>` + escape(line) + `</a:t></a:r></a:p>`)
	}
	b.WriteString(`</p:txBody></p:sp></p:spTree></p:cSld>` + clrMapOvr + `</p:notes>`)
	return []byte(b.String())
}

func notesSlideRels(n int) []byte {
	return rels(
		rel{"rId1", relNotesMaster, "../notesMasters/notesMaster1.xml"},
		rel{"rId2", relSlide, fmt.Sprintf("../slides/slide%d.xml", n)},
	)
}

// themeXML is a complete but plain theme: PowerPoint refuses a theme whose
// colour, font or format scheme is missing, and wants three entries in each
// style list of the format scheme.
var themeXML = []byte(xmlHeader + `<a:theme xmlns:a="` + nsA + `" name="Berth">` +
	`<a:themeElements>` +
	`<a:clrScheme name="Berth">` +
	`<a:dk1><a:sysClr val="windowText" lastClr="000000"/></a:dk1>` +
	`<a:lt1><a:sysClr val="window" lastClr="FFFFFF"/></a:lt1>` +
	`<a:dk2><a:srgbClr val="1F2937"/></a:dk2>` +
	`<a:lt2><a:srgbClr val="E5E7EB"/></a:lt2>` +
	`<a:accent1><a:srgbClr val="2563EB"/></a:accent1>` +
	`<a:accent2><a:srgbClr val="DC2626"/></a:accent2>` +
	`<a:accent3><a:srgbClr val="16A34A"/></a:accent3>` +
	`<a:accent4><a:srgbClr val="9333EA"/></a:accent4>` +
	`<a:accent5><a:srgbClr val="EA580C"/></a:accent5>` +
	`<a:accent6><a:srgbClr val="0891B2"/></a:accent6>` +
	`<a:hlink><a:srgbClr val="1D4ED8"/></a:hlink>` +
	`<a:folHlink><a:srgbClr val="7C3AED"/></a:folHlink>` +
	`</a:clrScheme>` +
	`<a:fontScheme name="Berth">` +
	`<a:majorFont><a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/></a:majorFont>` +
	`<a:minorFont><a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/></a:minorFont>` +
	`</a:fontScheme>` +
	`<a:fmtScheme name="Berth">` +
	`<a:fillStyleLst>` + strings.Repeat(`<a:solidFill><a:schemeClr val="phClr"/></a:solidFill>`, 3) + `</a:fillStyleLst>` +
	`<a:lnStyleLst>` +
	`<a:ln w="6350"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln>` +
	`<a:ln w="12700"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln>` +
	`<a:ln w="19050"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln>` +
	`</a:lnStyleLst>` +
	`<a:effectStyleLst>` + strings.Repeat(`<a:effectStyle><a:effectLst/></a:effectStyle>`, 3) + `</a:effectStyleLst>` +
	`<a:bgFillStyleLst>` + strings.Repeat(`<a:solidFill><a:schemeClr val="phClr"/></a:solidFill>`, 3) + `</a:bgFillStyleLst>` +
	`</a:fmtScheme>` +
	`</a:themeElements>` +
	`<a:objectDefaults/><a:extraClrSchemeLst/>` +
	`</a:theme>`)
