// Package pptx writes Office Open XML presentations (.pptx) whose slides are
// each one picture filling the whole slide, with optional speaker notes.
//
// It exists for document jobs that render slides as images (a browser
// screenshot per slide, say) and hand back a deck that PowerPoint, Keynote,
// Google Slides and LibreOffice open. The package is deliberately small: one
// slide master with one blank layout and a theme, one picture per slide,
// notes as plain paragraphs.
//
// A slide may instead be editable: a background colour and native shapes
// ([Shape]: rectangles, text boxes of styled runs and lists, pictures of
// PNG, JPEG or GIF bytes, tables), positioned in EMU, drawn over an
// optional full-slide picture. shapes.go writes them.
//
// # Package layout
//
// [Write] emits the parts PowerPoint insists on, not only those the standard
// requires: a theme related from the slide master, the master's colour map
// and text styles, the layout's relation back to its master, the
// presentation, view and table-style property parts, and for notes a notes
// master with its own theme and a notes slide per slide holding a slide-image
// placeholder and a body placeholder, related both ways with its slide.
// Every part has a content type and every relationship target exists.
//
// Output is deterministic: the same [Deck] always gives the same bytes (the
// zip entries carry a fixed time and core.xml no creation date).
//
// # Errors
//
// Invalid decks are refused before anything is written, with [errcode]
// codes: Invalid with reason "deck_invalid" (no slides, a slide size outside
// PowerPoint's limits, an image that is not a PNG, a shape with a bad
// colour, picture or table) and PayloadTooLarge with "deck_too_large"
// (more than [MaxSlides] slides, or [MaxShapes] shapes on a slide). Errors from the
// destination writer are returned wrapped, with no code.
package pptx
