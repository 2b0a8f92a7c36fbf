package docfmt

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
)

// decodeStream undoes a stream's filter. Only what object and
// cross-reference streams use is supported: no filter, or FlateDecode with
// an optional PNG predictor. Decompressed bytes are taken from *budget, and
// running out of it is an error.
func decodeStream(dict pdfDict, raw []byte, budget *int64) ([]byte, error) {
	filter, params := dict["Filter"], dict["DecodeParms"]
	if a, ok := filter.(pdfArray); ok {
		switch len(a) {
		case 0:
			filter = nil
		case 1:
			filter = a[0]
			if pa, ok := params.(pdfArray); ok && len(pa) == 1 {
				params = pa[0]
			}
		default:
			return nil, fmt.Errorf("stream has %d filters; only one is supported", len(a))
		}
	}
	switch filter {
	case nil:
		return raw, nil
	case pdfName("FlateDecode"):
	default:
		return nil, fmt.Errorf("stream filter %v is not supported", filter)
	}
	out, err := inflate(raw, budget)
	if err != nil {
		return nil, err
	}
	p, _ := params.(pdfDict)
	return unpredict(out, p)
}

func inflate(raw []byte, budget *int64) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("inflating stream: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, *budget+1))
	// Writers sometimes cut the checksum or the last block; what came out
	// before that is still usable, as viewers find.
	if err != nil && !(len(out) > 0 && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, zlib.ErrChecksum))) {
		return nil, fmt.Errorf("inflating stream: %w", err)
	}
	if int64(len(out)) > *budget {
		return nil, fmt.Errorf("decompressed streams exceed %d bytes", maxInflate)
	}
	*budget -= int64(len(out))
	return out, nil
}

// unpredict undoes the PNG predictors (10 to 15) of params.
func unpredict(data []byte, params pdfDict) ([]byte, error) {
	get := func(key pdfName, def int64) int64 {
		if v, ok := params[key].(int64); ok {
			return v
		}
		return def
	}
	predictor := get("Predictor", 1)
	switch {
	case predictor == 1:
		return data, nil
	case predictor < 10 || predictor > 15:
		return nil, fmt.Errorf("stream predictor %d is not supported", predictor)
	}
	columns, colors, bpc := get("Columns", 1), get("Colors", 1), get("BitsPerComponent", 8)
	if columns < 1 || columns > 1<<24 || colors < 1 || colors > 32 ||
		(bpc != 1 && bpc != 2 && bpc != 4 && bpc != 8 && bpc != 16) {
		return nil, fmt.Errorf("stream predictor parameters %v are invalid", params)
	}
	rowLen64 := (columns*colors*bpc + 7) / 8
	if rowLen64 >= int64(len(data)) {
		// Not one whole row: nothing to allocate rows for.
		return nil, nil
	}
	rowLen := int(rowLen64)
	bpp := max(int(colors*bpc/8), 1)
	out := make([]byte, 0, len(data)/(rowLen+1)*rowLen)
	prev := make([]byte, rowLen)
	for len(data) > rowLen {
		kind, row := data[0], data[1:rowLen+1]
		data = data[rowLen+1:]
		cur := make([]byte, rowLen)
		for i := range row {
			var left, upLeft byte
			if i >= bpp {
				left, upLeft = cur[i-bpp], prev[i-bpp]
			}
			up := prev[i]
			switch kind {
			case 0:
				cur[i] = row[i]
			case 1:
				cur[i] = row[i] + left
			case 2:
				cur[i] = row[i] + up
			case 3:
				cur[i] = row[i] + byte((int(left)+int(up))/2)
			case 4:
				cur[i] = row[i] + paeth(left, up, upLeft)
			default:
				return nil, fmt.Errorf("stream has PNG filter type %d", kind)
			}
		}
		out = append(out, cur...)
		prev = cur
	}
	return out, nil
}

func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
