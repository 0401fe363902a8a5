package prd

import "bytes"

// indent pretty-prints compact, valid JSON with two-space indentation, but
// keeps arrays of scalars on one line (["a", "b"], []): that is how people
// and the bash Ralph write acceptance criteria and dependencies, so a
// write-back of a hand-written file changes only what the model changed.
// Every line after the first starts with prefix; nl is the line end.
func indent(src []byte, prefix, nl string) []byte {
	var b bytes.Buffer
	depth := 0
	newline := func() {
		b.WriteString(nl)
		b.WriteString(prefix)
		for range depth {
			b.WriteString("  ")
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			j := stringEnd(src, i)
			b.Write(src[i:j])
			i = j - 1
		case '{', '[':
			end, flat := containerEnd(src, i)
			if end == i+1 { // empty
				b.WriteByte(c)
				b.WriteByte(src[end])
				i = end
				continue
			}
			if c == '[' && flat {
				writeFlat(&b, src[i:end+1])
				i = end
				continue
			}
			b.WriteByte(c)
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			b.WriteByte(c)
		case ',':
			b.WriteByte(',')
			newline()
		case ':':
			b.WriteString(": ")
		default:
			b.WriteByte(c)
		}
	}
	return b.Bytes()
}

// stringEnd returns the index just past the string starting at src[i].
func stringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(src)
}

// containerEnd finds the bracket closing the one at src[i] and whether the
// container holds no nested containers.
func containerEnd(src []byte, i int) (end int, flat bool) {
	flat = true
	depth := 0
	for j := i; j < len(src); j++ {
		switch src[j] {
		case '"':
			j = stringEnd(src, j) - 1
		case '{', '[':
			depth++
			if depth > 1 {
				flat = false
			}
		case '}', ']':
			depth--
			if depth == 0 {
				return j, flat
			}
		}
	}
	return len(src) - 1, flat
}

func writeFlat(b *bytes.Buffer, src []byte) {
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '"':
			j := stringEnd(src, i)
			b.Write(src[i:j])
			i = j - 1
		case ',':
			b.WriteString(", ")
		default:
			b.WriteByte(src[i])
		}
	}
}
