package store

import (
	"encoding/json"
	"errors"
)

// JSONErrorPos is the line and column (1-based) of the byte a JSON
// decode error of b points at: ok is false when the error carries no
// offset. Every file ralph reads as JSON names the place of a mistake.
func JSONErrorPos(b []byte, err error) (line, col int, ok bool) {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return 0, 0, false
	}
	line, col = OffsetPos(b, off)
	return line, col, true
}

// OffsetPos is the line and column of the byte before offset off (a
// decoder's offset is just past the byte it stopped at).
func OffsetPos(b []byte, off int64) (line, col int) {
	off = min(off, int64(len(b)))
	line, col = 1, 1
	for _, c := range b[:max(off-1, 0)] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
