package bundle

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path"
	"strings"

	"github.com/go-sourcemap/sourcemap"
)

// A bundle Pack made carries its source map as its last line, a data URL,
// so positions can point into the developer's sources ("handlers.ts:12:5")
// with no change to what is deployed, stored or sent to a worker: one
// artifact, one digest. Converting the bundle (toScript) chains that map
// into the script's, so goja's stacks name the sources; deploy-time errors
// found in the bundle are mapped with positionsOf.

// inlineMapPrefix opens the line that carries a packed bundle's source map.
const inlineMapPrefix = "//# sourceMappingURL=data:application/json;base64,"

// inlineMap returns esm with the source map sm appended as its last line.
func inlineMap(esm, sm []byte) []byte {
	if len(sm) == 0 {
		return esm
	}
	out := make([]byte, 0, len(esm)+len(inlineMapPrefix)+base64.StdEncoding.EncodedLen(len(sm))+2)
	out = append(out, esm...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, inlineMapPrefix...)
	out = base64.StdEncoding.AppendEncode(out, sm)
	return append(out, '\n')
}

// ownMap returns the source map esm carries on its last line, as Pack
// writes it, or nil.
func ownMap(esm []byte) []byte {
	s := bytes.TrimRight(esm, " \t\r\n")
	line := s[bytes.LastIndexByte(s, '\n')+1:]
	enc, ok := bytes.CutPrefix(line, []byte(inlineMapPrefix))
	if !ok {
		return nil
	}
	sm, err := base64.StdEncoding.AppendDecode(nil, enc)
	if err != nil {
		return nil
	}
	return sm
}

// sealMap returns esm as esbuild may convert it: its last source map
// comment — the only one esbuild reads — is its own inline map, or one that
// names no map. A comment naming a file (file:///etc/…) would have esbuild
// read that file from this machine's disk.
func sealMap(esm []byte) string {
	if ownMap(esm) != nil {
		return string(esm)
	}
	return string(esm) + "\n" + inlineMapPrefix + "e30=\n" // {}: no map
}

// positions maps line and column in a bundle to its sources.
type positions struct{ c *sourcemap.Consumer }

// positionsOf returns esm's own map, or nil when it carries none (or one
// that does not parse): positions then stay in the bundle.
func positionsOf(esm []byte) *positions {
	sm := ownMap(esm)
	if sm == nil {
		return nil
	}
	c, err := sourcemap.Parse("", sm)
	if err != nil {
		return nil
	}
	return &positions{c}
}

// at maps a 1-based line and column of the bundle; ok is false when the map
// does not cover it.
func (p *positions) at(line, col int) (file string, l, c int, ok bool) {
	if p == nil || line <= 0 {
		return "", 0, 0, false
	}
	src, _, l, c, ok := p.c.Source(line, max(col-1, 0))
	if !ok || src == "" {
		return "", 0, 0, false
	}
	return cleanSource(src), l, c + 1, true
}

// cleanSource makes a source map's source name a relative slash path
// ("helpers.ts", "node_modules/x/index.js", "../shared/a.ts").
func cleanSource(src string) string {
	src = strings.TrimPrefix(src, "file://")
	return path.Clean(src)
}

// oneBasedColumns returns the map sm with every original column one more:
// goja reports a mapped position's column as the map holds it, zero-based,
// and an unmapped one one-based, as people (and editors) count. Original
// columns are each relative to the one before, all through the mappings,
// so shifting the first shifts them all. sm is returned as is when it has
// no original column or does not parse.
func oneBasedColumns(sm []byte) []byte {
	var m map[string]json.RawMessage
	var mappings string
	if json.Unmarshal(sm, &m) != nil || json.Unmarshal(m["mappings"], &mappings) != nil {
		return sm
	}
	start := 0
	for i := 0; i <= len(mappings); i++ {
		if i < len(mappings) && mappings[i] != ',' && mappings[i] != ';' {
			continue
		}
		seg := mappings[start:i]
		start = i + 1
		vals, ok := decodeVLQ(seg)
		if !ok {
			return sm
		}
		if len(vals) < 4 {
			continue
		}
		vals[3]++
		var b strings.Builder
		for _, v := range vals {
			encodeVLQ(&b, v)
		}
		shifted, err := json.Marshal(mappings[:i-len(seg)] + b.String() + mappings[i:])
		if err != nil {
			return sm
		}
		m["mappings"] = shifted
		out, err := json.Marshal(m)
		if err != nil {
			return sm
		}
		return out
	}
	return sm
}

const vlqDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// decodeVLQ reads one segment of a source map's mappings.
func decodeVLQ(seg string) ([]int, bool) {
	var vals []int
	v, shift := 0, 0
	for i := 0; i < len(seg); i++ {
		d := strings.IndexByte(vlqDigits, seg[i])
		if d < 0 || shift > 30 {
			return nil, false
		}
		v |= (d & 31) << shift
		if d&32 != 0 {
			shift += 5
			continue
		}
		if v&1 != 0 {
			vals = append(vals, -(v >> 1))
		} else {
			vals = append(vals, v>>1)
		}
		v, shift = 0, 0
	}
	return vals, shift == 0
}

// encodeVLQ writes one value of a segment.
func encodeVLQ(b *strings.Builder, v int) {
	u := v << 1
	if v < 0 {
		u = (-v << 1) | 1
	}
	for {
		d := u & 31
		u >>= 5
		if u > 0 {
			d |= 32
		}
		b.WriteByte(vlqDigits[d])
		if u == 0 {
			return
		}
	}
}
