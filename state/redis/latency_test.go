package redis

import (
	"math"
	"testing"
	"time"
)

// unpackStats reads every number encoding Redis's cmsgpack writes when it
// re-packs the stats after an add (integers of each width, float32 where
// exact, float64), and what packStats writes.
func TestUnpackStats(t *testing.T) {
	epoch := time.Unix(0, 1767225600123456789)
	b := []byte{0x9c, 0xb3}
	b = append(b, epochString(epoch)...)
	b = append(b,
		0x05,       // positive fixint
		0xfb,       // negative fixint: -5
		0xcc, 0xc8, // uint8 200
		0xcd, 0x01, 0x00, // uint16 256
		0xce, 0x00, 0x01, 0x00, 0x00, // uint32 65536
		0xcf, 0, 0, 0, 1, 0, 0, 0, 0, // uint64 2^32
		0xd0, 0x80, // int8 -128
		0xd1, 0xff, 0x00, // int16 -256
		0xd2, 0xff, 0xff, 0x00, 0x00, // int32 -65536
		0xd3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, // int64 -2^32
		0xca, 0x3f, 0xc0, 0x00, 0x00, // float32 1.5
	)
	want := []float64{5, -5, 200, 256, 65536, 1 << 32, -128, -256, -65536, -(1 << 32), 1.5}
	s, err := unpackStats(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Epoch.Equal(epoch) || len(s.Sums) != len(want) {
		t.Fatalf("epoch %v, %d sums; want %v, %d", s.Epoch, len(s.Sums), epoch, len(want))
	}
	for i, v := range want {
		if s.Sums[i] != v {
			t.Fatalf("sum %d: %v, want %v", i, s.Sums[i], v)
		}
	}
	s.Sums = append(s.Sums, math.Pi, 1e300, -0.1)
	back, err := unpackStats(packStats(s))
	if err != nil || !back.Epoch.Equal(epoch) || len(back.Sums) != len(s.Sums) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for i := range s.Sums {
		if back.Sums[i] != s.Sums[i] {
			t.Fatalf("round trip: sum %d %v, want %v", i, back.Sums[i], s.Sums[i])
		}
	}
	for _, bad := range []string{"", "\x91", "\x92\xa1x\xc1", "\x9f\xa1x\x01", "\xdd\xff\xff\xff\xff"} {
		if _, err := unpackStats(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
