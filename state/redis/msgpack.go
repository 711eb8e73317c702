package redis

import (
	"encoding/binary"
	"math"

	"github.com/llm-router/llm-router/state"
)

// packCandidates encodes candidates for claim.lua as one MessagePack array
// of five arrays {ids, caps, bases, slopes, mults}, and with live reads
// eleven more, the candidates' scoring.LiveWeights {miss, prefill, decode,
// uncached coefficients, prefill limits, index bounds, match trusts, ahead
// and ahead-decode coefficients, ceilings, stall coefficients}
// (read only by claims that carry a Prompt): Redis's Lua decodes it in C,
// far cheaper than script arguments per candidate. Numbers are float64
// (Lua numbers are doubles), so the script computes with exactly the
// values Go has.
func packCandidates(cs []state.Candidate, live, adapter bool) string {
	n := len(cs)
	fields := []func(state.Candidate) float64{
		func(c state.Candidate) float64 { return float64(c.Cap) },
		func(c state.Candidate) float64 { return c.Base },
		func(c state.Candidate) float64 { return c.Slope },
		func(c state.Candidate) float64 { return c.Mult },
	}
	if live {
		fields = append(fields,
			func(c state.Candidate) float64 { return c.LiveWeights.Miss },
			func(c state.Candidate) float64 { return c.LiveWeights.Prefill },
			func(c state.Candidate) float64 { return c.LiveWeights.Decode },
			func(c state.Candidate) float64 { return c.LiveWeights.Uncached },
			func(c state.Candidate) float64 { return c.LiveWeights.PrefillLimit },
			func(c state.Candidate) float64 { return float64(c.IndexBound()) },
			func(c state.Candidate) float64 { return c.LiveWeights.MatchTrust() },
			func(c state.Candidate) float64 { return c.LiveWeights.Ahead },
			func(c state.Candidate) float64 { return c.LiveWeights.AheadDecode },
			func(c state.Candidate) float64 { return c.LiveWeights.Ceiling },
			func(c state.Candidate) float64 { return c.LiveWeights.Stall },
		)
	}
	if adapter {
		fields = append(fields,
			func(c state.Candidate) float64 { return c.Adapter.Idle },
			func(c state.Candidate) float64 { return c.Adapter.Load },
			func(c state.Candidate) float64 { return c.Adapter.Evict },
			func(c state.Candidate) float64 { return float64(c.Adapter.Slots) },
		)
	}
	b := make([]byte, 0, 16+n*(24+len(fields)*9))
	b = arrayHeader(b, 1+len(fields))
	b = arrayHeader(b, n)
	for _, c := range cs {
		b = packString(b, c.Worker)
	}
	for _, field := range fields {
		b = arrayHeader(b, n)
		for _, c := range cs {
			b = append(b, 0xcb)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(field(c)))
		}
	}
	return string(b)
}

func arrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

func packString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 1<<8:
		b = append(b, 0xd9, byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// packBlocks concatenates block hashes as 8 big-endian bytes each: the
// members of the prefix index's sorted sets (claim.lua cuts them apart).
func packBlocks(blocks []uint64) string {
	b := make([]byte, 0, 8*len(blocks))
	for _, h := range blocks {
		b = binary.BigEndian.AppendUint64(b, h)
	}
	return string(b)
}

// decoder reads the few MessagePack types Redis's cmsgpack writes for an
// array of a string and numbers; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = errPacked
		return make([]byte, min(n, 8)) // enough for every caller to read on
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uint(n int) uint64 {
	var v uint64
	for _, c := range d.take(n) {
		v = v<<8 | uint64(c)
	}
	return v
}

func (d *decoder) arrayLen() int {
	switch t := d.take(1)[0]; {
	case t&0xf0 == 0x90:
		return int(t & 0x0f)
	case t == 0xdc:
		return int(d.uint(2))
	case t == 0xdd:
		return int(d.uint(4))
	}
	d.err = errPacked
	return 0
}

func (d *decoder) str() string {
	var n int
	switch t := d.take(1)[0]; {
	case t&0xe0 == 0xa0:
		n = int(t & 0x1f)
	case t == 0xd9 || t == 0xc4:
		n = int(d.uint(1))
	case t == 0xda || t == 0xc5:
		n = int(d.uint(2))
	case t == 0xdb || t == 0xc6:
		n = int(d.uint(4))
	default:
		d.err = errPacked
	}
	return string(d.take(n))
}

func (d *decoder) number() float64 {
	switch t := d.take(1)[0]; {
	case t <= 0x7f:
		return float64(t)
	case t >= 0xe0:
		return float64(int8(t))
	case t == 0xca:
		return float64(math.Float32frombits(uint32(d.uint(4))))
	case t == 0xcb:
		return math.Float64frombits(d.uint(8))
	case t >= 0xcc && t <= 0xcf:
		return float64(d.uint(1 << (t - 0xcc)))
	case t >= 0xd0 && t <= 0xd3:
		n := 1 << (t - 0xd0)
		v := d.uint(n)
		shift := 64 - 8*n
		return float64(int64(v<<shift) >> shift)
	}
	d.err = errPacked
	return 0
}
