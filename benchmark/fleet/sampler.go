package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// InflightSample is every GPU's load at one moment of a run.
type InflightSample struct {
	// T is seconds of GPU time since the run started.
	T float64 `json:"t"`
	// Running and Waiting are per GPU, in fleet order: requests in the
	// batch and queued inside the GPU (-1: the GPU did not answer).
	Running []int `json:"running"`
	Waiting []int `json:"waiting"`
}

// gpuState is the part of gpusim's GET /admin/state the Sampler reads.
type gpuState struct {
	Running   int    `json:"running"`
	Waiting   int    `json:"waiting"`
	Completed uint64 `json:"completed"`
	// Prefix cache counters, tokens (gpusim's vllm:prefix_cache_*).
	PrefixQueries uint64 `json:"prefix_cache_queries"`
	PrefixHits    uint64 `json:"prefix_cache_hits"`
}

// PrefixCounters sums the fleet's prefix-cache counters.
func PrefixCounters(ctx context.Context, gpus []GPU) (queries, hits uint64, err error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, g := range gpus {
		st, err := getGPUState(ctx, hc, g.Addr)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", g.ID, err)
		}
		queries += st.PrefixQueries
		hits += st.PrefixHits
	}
	return queries, hits, nil
}

func getGPUState(ctx context.Context, hc *http.Client, addr string) (gpuState, error) {
	var st gpuState
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/admin/state", nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /admin/state: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Sampler polls every GPU's /admin/state at a fixed wall period until
// stopped.
type Sampler struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	samples []InflightSample
}

// StartSampler samples gpus every period; times are divided by scale.
func StartSampler(ctx context.Context, gpus []GPU, period time.Duration, scale float64) *Sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &Sampler{cancel: cancel}
	hc := &http.Client{Timeout: period}
	epoch := time.Now()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			sm := InflightSample{T: time.Since(epoch).Seconds() / scale, Running: make([]int, len(gpus)), Waiting: make([]int, len(gpus))}
			for i, g := range gpus {
				st, err := getGPUState(ctx, hc, g.Addr)
				if err != nil {
					st.Running, st.Waiting = -1, -1
				}
				sm.Running[i], sm.Waiting[i] = st.Running, st.Waiting
			}
			if ctx.Err() != nil {
				return
			}
			s.samples = append(s.samples, sm)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the samples.
func (s *Sampler) Stop() []InflightSample {
	s.cancel()
	s.wg.Wait()
	return s.samples
}

// WaitIdle waits until no GPU runs or queues anything, so that the next
// configuration starts on an idle fleet.
func WaitIdle(ctx context.Context, gpus []GPU, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		busy := 0
		var lastErr error
		for _, g := range gpus {
			st, err := getGPUState(ctx, hc, g.Addr)
			if err != nil {
				lastErr = err
				busy++
				continue
			}
			busy += st.Running + st.Waiting
		}
		if busy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet still busy (%d requests) after %v: %w", busy, timeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
