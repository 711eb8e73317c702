package host

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 50 ticks: 3 s. The name holds a space and a ')'.
	stat := "4242 (my (odd) proc) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 8 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Fatalf("got %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 x y"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Our own process, for real: a positive, readable counter.
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		if d, err := CPUTime(os.Getpid()); err != nil || d < 0 {
			t.Errorf("CPUTime(self) = %v, %v", d, err)
		}
	}
}

func TestParseProcStatCPU(t *testing.T) {
	busy, total, ok := parseProcStatCPU("cpu  100 5 50 800 40 3 2 0 7 0")
	// user nice system idle iowait irq softirq steal (guest excluded)
	if !ok || total != 1000 || busy != 160 {
		t.Errorf("busy %d total %d ok %v; want 160 1000", busy, total, ok)
	}
	if _, _, ok := parseProcStatCPU("cpu0 1 2 3 4"); ok {
		t.Error("per-core line accepted")
	}
	if _, _, ok := parseProcStatCPU("cpu 1 x 3 4"); ok {
		t.Error("bad number accepted")
	}
}
