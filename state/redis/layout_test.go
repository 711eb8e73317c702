package redis_test

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scoring/latency"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// TestLatencyOfAnotherLayoutReplaced: sums a router of another
// latency.Version stored (another length) are replaced by the first
// contribution, not added to: added element by element they would stay
// at the old length, which no fit reads, and the worker would never be
// learned again.
func TestLatencyOfAnotherLayoutReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()
	s := redisstore.New(client, "latlayout", state.Limits{Lease: time.Minute})
	if err := s.Register(ctx, []state.WorkerSpec{{ID: "w0", Address: "10.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 1}}); err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(0, time.Now().UnixNano())
	// An older layout's stats: the epoch, then 60 sums, as MessagePack.
	old := []byte{0xdc, 0, 61}
	ns := strconv.FormatInt(epoch.UnixNano(), 10)
	old = append(append(old, byte(0xa0|len(ns))), ns...)
	for range 60 {
		old = binary.BigEndian.AppendUint64(append(old, 0xcb), math.Float64bits(1))
	}
	if err := client.HSet(ctx, s.Prefix()+"lat:w0", "m", string(old)).Err(); err != nil {
		t.Fatal(err)
	}
	o := latency.Observation{At: epoch, Features: latency.Features{Uncached: 500, Output: 100}, TTFT: 80 * time.Millisecond, TPOT: 20 * time.Millisecond}
	c := latency.DefaultConfig().Contribution(latency.Model{Epoch: epoch}, o)
	if err := s.AddLatency(ctx, []state.LatencyContribution{{Worker: "w0", Model: "m", Stats: c}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Workers[0].LatencyStats["m"]
	if len(got.Sums) != latency.Size || !got.Epoch.Equal(epoch) {
		t.Fatalf("stats after a contribution: %d sums at %v, want the contribution's %d at %v", len(got.Sums), got.Epoch, latency.Size, epoch)
	}
	for i, v := range c.Sums {
		if got.Sums[i] != v {
			t.Fatalf("sum %d: %v, want the contribution's %v", i, got.Sums[i], v)
		}
	}
}
