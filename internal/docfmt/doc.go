// Package docfmt validates documents that jobs produce (PDF, PPTX, PNG)
// before Berth stores them, and reports their page, slide or pixel counts.
//
// The checks are structural, not a full parse: enough to refuse truncated,
// mislabelled or hostile files and to count pages the way a viewer would,
// cheaply and in bounded memory. Input is untrusted: every length, count,
// nesting depth and decompressed size has a cap, and the functions never
// panic (FuzzPDF, FuzzPPTX and FuzzPNG hold them to that).
//
// # PDF
//
// [PDF] requires a %PDF-1.x or %PDF-2.0 header in the first 1024 bytes,
// %%EOF in the last 1024, and a startxref whose offset lands on a
// cross-reference table ("xref") or a cross-reference stream object. It then
// follows the cross-reference chain (tables, streams, hybrid files, /Prev
// sections of incremental updates) from the trailer's /Root to the catalog,
// to the page tree root, and reads its /Count. Objects may sit in compressed
// object streams (/Type /ObjStm, FlateDecode, with PNG predictors for
// cross-reference streams). When that chain is broken it falls back to
// scanning the file (up to [MaxPDFScan] bytes, read into memory) for
// objects of /Type /Page, including inside object streams, the way viewers
// repair damaged files.
//
// # PPTX
//
// [PPTX] requires a zip with [Content_Types].xml and ppt/presentation.xml
// (with a presentation content type), and counts the slides of its
// sldIdLst, each of which must resolve through
// ppt/_rels/presentation.xml.rels to a slide part in the zip.
//
// # PNG
//
// [PNG] reads the header, refuses images over [MaxPNGSide] pixels a side or
// [MaxPNGPixels] pixels in all before allocating anything, then decodes the
// whole image so that corrupt data is caught.
//
// # Errors
//
// A document that fails a check gets an [errcode] error: Invalid with reason
// "pdf_invalid", "pptx_invalid" or "png_invalid", or PayloadTooLarge with
// "png_too_large". Its message says what is wrong ("not a PDF: no %PDF-
// header", "truncated PDF: no %%EOF", "PDF has no pages"). Errors reading r
// are returned wrapped, without a code.
//
// The functions are safe for concurrent use; each reads r only through
// ReadAt (PDF, PPTX) or Read (PNG).
package docfmt
