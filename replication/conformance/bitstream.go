package conformance

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// op is one field encoding: "op" names it, the other keys are its
// arguments, and "decoded" (lossy encodings only) is what a reader gets.
type op map[string]any

// bsCase is one bit stream: its ops written in order.
type bsCase struct {
	Name  string `json:"name"`
	Ops   []op   `json:"ops"`
	Bits  int    `json:"bits"`
	Hex   string `json:"hex"`
	Error string `json:"error,omitempty"`
}

var bitstreamSchema = []Field{
	{"vectors[].name", "what the case shows"},
	{"vectors[].ops", "field encodings written one after the other into one stream (docs/protocol.md § 2.2–2.7)"},
	{"vectors[].ops[].op", "bits (value: decimal string, n), flag (value), ranged_int (value, min, max), unit_float (value, bits), quantized (value, min, max, bits), signed_float (value, bits), fixed (value, min, max, precision), float32 (value: f32bits), unit_vector (x, y, z, bits), quat (q: [x, y, z, w], bits), string (value, max_len), table_string (value, max_len, slots: table size N, table: {slot: string}), gamma (value: decimal string), bytes (value: hex)"},
	{"vectors[].ops[].decoded", "lossy encodings: the value(s) a reader decodes, f64 (unit_vector: [x, y, z]; quat: [x, y, z, w])"},
	{"vectors[].bits, hex", "the stream"},
	{"vectors[].error", "set on a reject case: reading the ops from hex must fail at that field; the ops give the reader's parameters, their values are irrelevant"},
}

func bitstreamDoc() (doc, error) {
	tbl := map[string]any{"34": "Hey"}
	cases := []bsCase{
		{Name: "book figure 4.9: 5-bit 13 then 6-bit 52", Ops: []op{{"op": "bits", "value": "13", "n": 5}, {"op": "bits", "value": "52", "n": 6}}},
		{Name: "32-bit value is little-endian", Ops: []op{{"op": "bits", "value": "305419896", "n": 32}}},
		{Name: "64-bit value", Ops: []op{{"op": "bits", "value": "18364758544493064720", "n": 64}}},
		{Name: "fields across byte boundaries", Ops: []op{{"op": "bits", "value": "1", "n": 3}, {"op": "bits", "value": "1023", "n": 10}, {"op": "bits", "value": "0", "n": 2}, {"op": "bits", "value": "123456789", "n": 27}}},
		{Name: "flags 1 0 1 1", Ops: []op{{"op": "flag", "value": true}, {"op": "flag", "value": false}, {"op": "flag", "value": true}, {"op": "flag", "value": true}}},
		{Name: "ranged int, inclusive width: [0, 32] is 6 bits", Ops: []op{{"op": "ranged_int", "value": 17, "min": 0, "max": 32}}},
		{Name: "ranged int with a negative minimum", Ops: []op{{"op": "ranged_int", "value": -3, "min": -8, "max": 7}}},
		{Name: "ranged int, min = max takes 0 bits", Ops: []op{{"op": "ranged_int", "value": 5, "min": 5, "max": 5}, {"op": "flag", "value": true}}},
		{Name: "Torque writeFloat(0.45, 5)", Ops: []op{{"op": "unit_float", "value": 0.45, "bits": 5}}},
		{Name: "unit float ends are exact", Ops: []op{{"op": "unit_float", "value": 0.0, "bits": 7}, {"op": "unit_float", "value": 1.0, "bits": 7}}},
		{Name: "quantized", Ops: []op{{"op": "quantized", "value": 12.34, "min": -50.0, "max": 50.0, "bits": 12}}},
		{Name: "quantized, 32 bits", Ops: []op{{"op": "quantized", "value": -1234.5678, "min": -2000.0, "max": 2000.0, "bits": 32}}},
		{Name: "fixed: code 1 (rounded, not truncated)", Ops: []op{{"op": "fixed", "value": -1999.9, "min": -2000.0, "max": 2000.0, "precision": 0.1}}},
		{Name: "fixed: top code", Ops: []op{{"op": "fixed", "value": 2000.0, "min": -2000.0, "max": 2000.0, "precision": 0.1}}},
		{Name: "fixed: centimetres", Ops: []op{{"op": "fixed", "value": 3.14159, "min": -10.0, "max": 10.0, "precision": 0.01}}},
		{Name: "signed float, half away from zero", Ops: []op{{"op": "signed_float", "value": -0.5, "bits": 8}}},
		{Name: "signed float ends and zero", Ops: []op{{"op": "signed_float", "value": -1.0, "bits": 10}, {"op": "signed_float", "value": 0.0, "bits": 10}, {"op": "signed_float", "value": 1.0, "bits": 10}, {"op": "signed_float", "value": 0.3337, "bits": 10}}},
		{Name: "float32", Ops: []op{{"op": "float32", "value": "bfc00000"}}},
		{Name: "float32 negative zero", Ops: []op{{"op": "float32", "value": "80000000"}}},
		{Name: "unit vector +z", Ops: []op{{"op": "unit_vector", "x": 0.0, "y": 0.0, "z": 1.0, "bits": 8}}},
		{Name: "unit vector -z", Ops: []op{{"op": "unit_vector", "x": 0.0, "y": 0.0, "z": -1.0, "bits": 8}}},
		{Name: "unit vector, lower half", Ops: []op{{"op": "unit_vector", "x": 0.3, "y": -0.4, "z": -0.5, "bits": 12}}},
		{Name: "unit vector, 16 bits, not normalized", Ops: []op{{"op": "unit_vector", "x": -3.0, "y": 2.0, "z": 6.0, "bits": 16}}},
		{Name: "unit vector on the fold's border", Ops: []op{{"op": "unit_vector", "x": -0.7071067811865476, "y": -0.7071067811865476, "z": -1e-17, "bits": 8}}},
		{Name: "quaternion identity", Ops: []op{{"op": "quat", "q": []any{0.0, 0.0, 0.0, 1.0}, "bits": 15}}},
		{Name: "quaternion, normalized on write", Ops: []op{{"op": "quat", "q": []any{0.1, -0.2, 0.3, 0.9}, "bits": 15}}},
		{Name: "quaternion tie (truncated)", Ops: []op{{"op": "quat", "q": []any{0.5, 0.5, 0.5, 0.5}, "bits": 15}}},
		{Name: "quaternion, largest is negative x", Ops: []op{{"op": "quat", "q": []any{-0.8, 0.2, 0.1, 0.3}, "bits": 10}}},
		{Name: "string Hey, max 64", Ops: []op{{"op": "string", "value": "Hey", "max_len": 64}}},
		{Name: "string Fuzzy, max 128", Ops: []op{{"op": "string", "value": "Fuzzy", "max_len": 128}}},
		{Name: "empty string", Ops: []op{{"op": "string", "value": "", "max_len": 31}}},
		{Name: "table string hit: slot 34 of 1024", Ops: []op{{"op": "table_string", "value": "Hey", "max_len": 64, "slots": 1024, "table": tbl}}},
		{Name: "table string miss: literal", Ops: []op{{"op": "table_string", "value": "Hi", "max_len": 64, "slots": 1024, "table": tbl}}},
		{Name: "name with no table (the stock classes): literal, 5-bit length", Ops: []op{{"op": "table_string", "value": "p42", "max_len": 31, "slots": 0, "table": map[string]any{}}}},
		{Name: "gamma 1, 2, 5, 2^40", Ops: []op{{"op": "gamma", "value": "1"}, {"op": "gamma", "value": "2"}, {"op": "gamma", "value": "5"}, {"op": "gamma", "value": "1099511627776"}}},
		{Name: "bytes, not aligned", Ops: []op{{"op": "flag", "value": true}, {"op": "bytes", "value": "deadbeef"}}},
	}
	rejects := []bsCase{
		{Name: "ranged int code above max − min", Ops: []op{{"op": "ranged_int", "value": 0, "min": 0, "max": 4}}, Hex: "07", Bits: 3, Error: "code 7 > 4"},
		{Name: "signed float code 2^bits − 1", Ops: []op{{"op": "signed_float", "value": 0.0, "bits": 8}}, Hex: "ff", Bits: 8, Error: "code 255 is never written"},
		{Name: "float32 NaN", Ops: []op{{"op": "float32", "value": "00000000"}}, Hex: "0000c07f", Bits: 32, Error: "exponent all ones"},
		{Name: "float32 +infinity", Ops: []op{{"op": "float32", "value": "00000000"}}, Hex: "0000807f", Bits: 32, Error: "exponent all ones"},
		{Name: "fixed code above S", Ops: []op{{"op": "fixed", "value": 0.0, "min": -2000.0, "max": 2000.0, "precision": 0.1}}, Hex: "ffff", Bits: 16, Error: "code 65535 > S = 40000"},
		{Name: "string longer than max_len", Ops: []op{{"op": "string", "value": "", "max_len": 5}}, Hex: "0f", Bits: 8, Error: "length 7 > 5"},
		{Name: "string longer than the bits left", Ops: []op{{"op": "string", "value": "", "max_len": 64}}, Hex: "05", Bits: 8, Error: "5 bytes announced, 1 bit left"},
		{Name: "table string hit on an empty slot", Ops: []op{{"op": "table_string", "value": "", "max_len": 64, "slots": 1024, "table": tbl}}, Hex: "0300", Bits: 11, Error: "slot 1 is empty"},
		{Name: "table string hit without a table", Ops: []op{{"op": "table_string", "value": "", "max_len": 31, "slots": 0, "table": map[string]any{}}}, Hex: "01", Bits: 1, Error: "no table: flag 1 is invalid"},
		{Name: "gamma with 64 leading zeros", Ops: []op{{"op": "gamma", "value": "1"}}, Hex: "00000000000000000100", Bits: 80, Error: "64 zeros"},
		{Name: "unit vector code 2^bits − 1", Ops: []op{{"op": "unit_vector", "x": 0.0, "y": 0.0, "z": 1.0, "bits": 8}}, Hex: "ff7f", Bits: 16, Error: "code 255 is never written"},
		{Name: "unit vector, non-canonical border point", Ops: []op{{"op": "unit_vector", "x": 0.0, "y": 0.0, "z": 1.0, "bits": 8}}, Hex: "fe00", Bits: 16, Error: "|a| = m and b < 0 on the lower half"},
		{Name: "quaternion, non-canonical codes", Ops: []op{{"op": "quat", "q": []any{0.0, 0.0, 0.0, 1.0}, "bits": 15}}, Hex: "fbffff7fff3f", Bits: 47, Error: "codes (m, 0, 0): the rebuilt w is not strictly the largest"},
	}
	for i := range cases {
		if err := fillCase(&cases[i]); err != nil {
			return doc{}, fmt.Errorf("%s: %w", cases[i].Name, err)
		}
	}
	for i := range rejects {
		if err := checkReject(&rejects[i]); err != nil {
			return doc{}, fmt.Errorf("%s: %w", rejects[i].Name, err)
		}
	}
	return doc{
		Description: "Field encodings of the bit stream: each case writes its ops in order into one stream; a reader reading the same ops from hex gets the values back (or, for lossy encodings, \"decoded\"). Reject cases are streams a conforming reader must refuse.",
		Spec:        "docs/protocol.md § 2",
		Schema:      bitstreamSchema,
		Vectors:     map[string]any{"encode": cases, "reject": rejects},
	}, nil
}

// normalize round-trips v through JSON, so the generator and a replay
// from the file see the same types (numbers as float64).
func normalize(ops []op) ([]op, error) {
	b, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	var out []op
	return out, json.Unmarshal(b, &out)
}

func fillCase(c *bsCase) error {
	ops, err := normalize(c.Ops)
	if err != nil {
		return err
	}
	var buf [256]byte
	w := bitstream.NewWriter(buf[:])
	for _, o := range ops {
		if err := writeOp(w, o); err != nil {
			return err
		}
	}
	c.Bits, c.Hex = w.BitLen(), hx(w.Bytes())
	r := bitstream.NewReader(w.Bytes())
	for i, o := range ops {
		d, err := readOp(r, o)
		if err != nil {
			return err
		}
		if d != nil {
			c.Ops[i]["decoded"] = d
		}
	}
	return nil
}

func checkReject(c *bsCase) error {
	ops, err := normalize(c.Ops)
	if err != nil {
		return err
	}
	b, err := hexBytes(c.Hex)
	if err != nil {
		return err
	}
	r := bitstream.NewReader(nil)
	r.ResetBits(b, c.Bits)
	for _, o := range ops {
		if _, err := readOp(r, o); err != nil {
			return nil
		}
	}
	return fmt.Errorf("reader accepted %s", c.Hex)
}

func num(o op, k string) float64 {
	switch v := o[k].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	}
	panic(fmt.Sprintf("conformance: op %v: %s is not a number", o["op"], k))
}

func str(o op, k string) string {
	s, ok := o[k].(string)
	if !ok {
		panic(fmt.Sprintf("conformance: op %v: %s is not a string", o["op"], k))
	}
	return s
}

func u64arg(o op, k string) uint64 {
	v, err := strconv.ParseUint(str(o, k), 10, 64)
	if err != nil {
		panic(err)
	}
	return v
}

func table(o op) (*bitstream.StringTable, error) {
	n := int(num(o, "slots"))
	if n == 0 {
		return nil, nil
	}
	t := bitstream.NewStringTable(n)
	for k, v := range o["table"].(map[string]any) {
		slot, err := strconv.Atoi(k)
		if err != nil {
			return nil, err
		}
		if err := t.Set(slot, v.(string)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func quatArg(o op) [4]float64 {
	a := o["q"].([]any)
	return [4]float64{a[0].(float64), a[1].(float64), a[2].(float64), a[3].(float64)}
}

func writeOp(w *bitstream.Writer, o op) error {
	switch o["op"] {
	case "bits":
		return w.WriteBits(u64arg(o, "value"), uint(num(o, "n")))
	case "flag":
		return w.WriteFlag(o["value"].(bool))
	case "ranged_int":
		return w.WriteRangedInt(int64(num(o, "value")), int64(num(o, "min")), int64(num(o, "max")))
	case "unit_float":
		return w.WriteUnitFloat(num(o, "value"), uint(num(o, "bits")))
	case "quantized":
		return w.WriteQuantized(num(o, "value"), num(o, "min"), num(o, "max"), uint(num(o, "bits")))
	case "signed_float":
		return w.WriteSignedFloat(num(o, "value"), uint(num(o, "bits")))
	case "fixed":
		return w.WriteFixed(num(o, "value"), num(o, "min"), num(o, "max"), num(o, "precision"))
	case "float32":
		f, err := parseF32(str(o, "value"))
		if err != nil {
			return err
		}
		return w.WriteFloat32(f)
	case "unit_vector":
		return w.WriteUnitVector(num(o, "x"), num(o, "y"), num(o, "z"), uint(num(o, "bits")))
	case "quat":
		return w.WriteQuatBits(quatArg(o), uint(num(o, "bits")))
	case "string":
		return w.WriteString(str(o, "value"), int(num(o, "max_len")))
	case "table_string":
		t, err := table(o)
		if err != nil {
			return err
		}
		return w.WriteTableString(t, str(o, "value"), int(num(o, "max_len")))
	case "gamma":
		return w.WriteGamma(u64arg(o, "value"))
	case "bytes":
		b, err := hexBytes(str(o, "value"))
		if err != nil {
			return err
		}
		return w.WriteBytes(b)
	}
	return fmt.Errorf("unknown op %v", o["op"])
}

// readOp reads o's field and checks exact encodings against o's value; it
// returns the decoded value of a lossy encoding (nil otherwise).
func readOp(r *bitstream.Reader, o op) (any, error) {
	mismatch := func(got any) error { return fmt.Errorf("op %v: read %v, want %v", o["op"], got, o["value"]) }
	switch o["op"] {
	case "bits":
		v, err := r.ReadBits(uint(num(o, "n")), "bits")
		if err == nil && v != u64arg(o, "value") {
			return nil, mismatch(v)
		}
		return nil, err
	case "flag":
		v, err := r.ReadFlag("flag")
		if err == nil && v != o["value"].(bool) {
			return nil, mismatch(v)
		}
		return nil, err
	case "ranged_int":
		v, err := r.ReadRangedInt(int64(num(o, "min")), int64(num(o, "max")), "ranged_int")
		if err == nil && v != int64(num(o, "value")) {
			return nil, mismatch(v)
		}
		return nil, err
	case "unit_float":
		v, err := r.ReadUnitFloat(uint(num(o, "bits")), "unit_float")
		return f64(v), err
	case "quantized":
		v, err := r.ReadQuantized(num(o, "min"), num(o, "max"), uint(num(o, "bits")), "quantized")
		return f64(v), err
	case "signed_float":
		v, err := r.ReadSignedFloat(uint(num(o, "bits")), "signed_float")
		return f64(v), err
	case "fixed":
		v, err := r.ReadFixed(num(o, "min"), num(o, "max"), num(o, "precision"), "fixed")
		return f64(v), err
	case "float32":
		v, err := r.ReadFloat32("float32")
		if err == nil && f32bits(v) != str(o, "value") {
			return nil, mismatch(f32bits(v))
		}
		return nil, err
	case "unit_vector":
		x, y, z, err := r.ReadUnitVector(uint(num(o, "bits")), "unit_vector")
		return []f64{f64(x), f64(y), f64(z)}, err
	case "quat":
		q, err := r.ReadQuatBits(uint(num(o, "bits")), "quat")
		return []f64{f64(q[0]), f64(q[1]), f64(q[2]), f64(q[3])}, err
	case "string":
		v, err := r.ReadString(int(num(o, "max_len")), "string")
		if err == nil && v != str(o, "value") {
			return nil, mismatch(v)
		}
		return nil, err
	case "table_string":
		t, err := table(o)
		if err != nil {
			return nil, err
		}
		v, err := r.ReadTableString(t, int(num(o, "max_len")), "table_string")
		if err == nil && v != str(o, "value") {
			return nil, mismatch(v)
		}
		return nil, err
	case "gamma":
		v, err := r.ReadGamma("gamma")
		if err == nil && v != u64arg(o, "value") {
			return nil, mismatch(v)
		}
		return nil, err
	case "bytes":
		want, err := hexBytes(str(o, "value"))
		if err != nil {
			return nil, err
		}
		got := make([]byte, len(want))
		if err := r.ReadBytes(got, "bytes"); err != nil {
			return nil, err
		}
		if hx(got) != hx(want) {
			return nil, mismatch(hx(got))
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown op %v", o["op"])
}
