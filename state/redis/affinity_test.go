package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
	redisstore "github.com/llm-router/llm-router/state/redis"
)

// TestAffinityClaimCost measures what the prefix index costs Redis per
// request (server CPU of the claim and release scripts, from INFO
// commandstats): 16 candidates, each index full (4,096 blocks) of prompts
// of the measured length, a prompt matching half its blocks on one worker,
// against the same claims without affinity. It reports the figures
// (go test -run AffinityClaimCost -v ./state/redis) and bounds them loosely, so
// a regression to a linear scan per candidate shows.
func TestAffinityClaimCost(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	for _, blocks := range []int{64, 256, 1024} {
		off, on := affinityClaimCost(t, blocks)
		t.Logf("%4d-block prompts, 16 candidates: %.0f µs of Redis CPU per request without affinity, %.0f µs with", blocks, 2*off, 2*on)
		if on > 5000 {
			t.Errorf("%.0f µs per call with affinity: the lookup or the record is no longer bounded", on)
		}
	}
}

func affinityClaimCost(t *testing.T, blocks int) (off, on float64) {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()
	s := redisstore.New(client, fmt.Sprintf("cost%d", prefixSeq.Add(1)), state.Limits{})
	const workers = 16
	var specs []state.WorkerSpec
	var cands []state.Candidate
	for i := range workers {
		id := fmt.Sprintf("w%d", i)
		specs = append(specs, state.WorkerSpec{ID: id, Address: fmt.Sprintf("10.1.0.%d:1", i), Models: []string{"m"}, MaxConcurrency: 1 << 20})
		cands = append(cands, state.Candidate{Worker: id, Cap: 1 << 20, Slope: 1, Base: float64(i), LiveWeights: scoring.LiveWeights{Miss: 100, Prefill: 0.001, Decode: 0.001, Uncached: 0.001, KVBlocks: 4096}})
	}
	if err := s.Register(ctx, specs); err != nil {
		t.Fatal(err)
	}
	prompt := func(seed uint64, shared int) []uint64 {
		out := make([]uint64, blocks)
		for i := range out {
			if i < shared {
				out[i] = uint64(i) + 1
			} else {
				out[i] = seed<<32 + uint64(i)
			}
		}
		return out
	}
	// Fill every index to its bound.
	n := 0
	for i := range workers {
		for k := range 4096 / blocks {
			n++
			one := []state.Candidate{cands[i]}
			res, err := s.Claim(ctx, state.ClaimRequest{
				ID: fmt.Sprintf("fill-%d", n), Candidates: one,
				Prompt: scoring.Prompt{Blocks: prompt(uint64(i*10+k+1), 0), PromptTokens: blocks * 16},
			})
			if err != nil || res.Index != 0 {
				t.Fatalf("fill: %v %+v", err, res)
			}
		}
	}
	run := func(aff bool, claims int) float64 {
		t.Helper()
		if err := client.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for c := range claims {
			n++
			req := state.ClaimRequest{ID: fmt.Sprintf("c-%d", n), Candidates: cands}
			if aff {
				req.Prompt = scoring.Prompt{Blocks: prompt(uint64(1000+c), blocks/2), PromptTokens: blocks * 16, DecodeTokens: 256}
			}
			if _, err := s.Claim(ctx, req); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Release(ctx, state.Release{ID: req.ID}); err != nil {
				t.Fatal(err)
			}
		}
		return usecPerCall(t, client, "evalsha")
	}
	return run(false, 200), run(true, 200)
}

// usecPerCall reads usec_per_call of cmd from INFO commandstats.
func usecPerCall(t *testing.T, c *redis.Client, cmd string) float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_"+cmd+":") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_"+cmd+":")), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
		}
	}
	t.Fatalf("no %s in commandstats", cmd)
	return 0
}
