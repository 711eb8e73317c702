package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// The memory of recent releases keeps exactly the last two leases, held
// ids excluded, however long it runs.
func TestRecentReleasesWindow(t *testing.T) {
	clock := time.Unix(1000, 0)
	f := New(redisstore.New(nil, "w", state.Limits{Lease: time.Second}), nil)
	f.now = func() time.Time { return clock }
	for i := 0; i < 10000; i++ { // 10 s of releases, one a millisecond
		f.noteReleased(fmt.Sprintf("r%d", i))
		clock = clock.Add(time.Millisecond)
	}
	f.setLive("r9999", "w0") // failed, then claimed locally: held
	got := f.recentReleases()
	// The last 2 s: r8000..r9999 noted within releaseMemory, r9999 held.
	if len(got) != 1999 && len(got) != 2000 {
		t.Fatalf("%d remembered, want the last 2 s (~2,000) less the held one", len(got))
	}
	if got[len(got)-1] != "r9998" {
		t.Fatalf("newest remembered %s, want r9998", got[len(got)-1])
	}
	if len(f.released)-f.releasedHead > 2100 || cap(f.released) > 8192 {
		t.Fatalf("memory grew: %d entries from head %d, cap %d", len(f.released), f.releasedHead, cap(f.released))
	}
}

func BenchmarkNoteReleased(b *testing.B) {
	f := New(redisstore.New(nil, "w", state.Limits{Lease: 10 * time.Second}), nil)
	clock := time.Unix(1000, 0)
	f.now = func() time.Time { return clock }
	for i := 0; i < b.N; i++ {
		f.noteReleased("claim")
		clock = clock.Add(100 * time.Microsecond) // 10,000 releases/s
	}
}
