package conformance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// File is one vector file: its name under docs/vectors and its bytes.
type File struct {
	Name string
	Data []byte
}

// Field documents one field of a file's vectors for a reader who does not
// read Go.
type Field struct {
	Field   string `json:"field"`
	Meaning string `json:"meaning"`
}

// doc is the layout of every file.
type doc struct {
	Description string  `json:"description"`
	Spec        string  `json:"spec"`
	Conventions []Field `json:"conventions"`
	Schema      []Field `json:"schema"`
	Vectors     any     `json:"vectors"`
}

// conventions are shared by every file.
var conventions = []Field{
	{"hex", "bytes as lowercase hex, in wire order; \"\" is no bytes"},
	{"bits", "the exact bit length of a bit stream; the last byte's unused high bits are zero"},
	{"integers", "JSON numbers; a field that can exceed 2^53 (sequence numbers, ids, 64-bit values) is a decimal string"},
	{"f64", "a binary64 value as a JSON number in shortest round-trip form (parse it with a correct parser: it gives the exact double); -0 is written -0"},
	{"f32bits", "a binary32 value as its 8-hex-digit bit pattern, big-endian digits (3f800000 = 1.0): exact, and -0 (80000000) differs from +0"},
	{"ms", "times in milliseconds of a virtual clock that starts at 0 (nothing reads a real clock)"},
}

type builder struct {
	name string
	fn   func() (doc, error)
}

var builders = []builder{
	{"bitstream.json", bitstreamDoc},
	{"notify.json", notifyDoc},
	{"event.json", eventDoc},
	{"move.json", moveDoc},
	{"walk.json", walkDoc},
	{"ghost.json", ghostDoc},
	{"handshake.json", handshakeDoc},
	{"session.json", sessionDoc},
	{"redirect.json", redirectDoc},
	{"stock.json", stockDoc},
}

// Files builds every vector file in memory, in a fixed order. The result
// depends on nothing but this module's code.
func Files() ([]File, error) {
	out := make([]File, 0, len(builders))
	for _, b := range builders {
		d, err := b.fn()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		d.Conventions = conventions
		data, err := marshal(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		out = append(out, File{Name: b.name, Data: data})
	}
	return out, nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func hx(b []byte) string { return hex.EncodeToString(b) }

func f32bits(f float32) string { return fmt.Sprintf("%08x", math.Float32bits(f)) }

func u64(v uint64) string { return fmt.Sprint(v) }

// f64 keeps -0 (encoding/json writes it as -0 already) and refuses NaN/Inf,
// which JSON cannot hold: a vector never contains them.
type f64 float64

func (f f64) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("conformance: non-finite value %v in a vector", v)
	}
	return json.Marshal(v)
}

func hexBytes(s string) ([]byte, error) { return hex.DecodeString(s) }

func parseF32(s string) (float32, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return 0, err
	}
	return math.Float32frombits(uint32(v)), nil
}

func parseU64(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }
