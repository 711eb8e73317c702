package redis

import (
	"encoding/binary"
	"math"

	"github.com/llm-router/llm-router/state"
)

// packCandidates encodes candidates for claim.lua as one MessagePack array
// of five arrays {ids, caps, bases, slopes, mults}, and with live reads
// ten more, the candidates' scoring.LiveWeights {miss, prefill, decode,
// uncached coefficients, prefill limits, index bounds, match trusts, ahead
// and ahead-decode coefficients, ceilings}
// (read only by claims that carry a Prompt): Redis's Lua decodes it in C,
// far cheaper than script arguments per candidate. Numbers are float64
// (Lua numbers are doubles), so the script computes with exactly the
// values Go has.
func packCandidates(cs []state.Candidate, live bool) string {
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
		)
	}
	b := make([]byte, 0, 16+n*(24+len(fields)*9))
	b = append(b, 0x90|byte(1+len(fields))) // fixarray
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
