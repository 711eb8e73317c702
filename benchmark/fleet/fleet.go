package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/benchmark/gpusim"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// Default is the heterogeneous fleet of the comparison: two GPUs of
// each calibrated profile, the fast H100, the A100 and the slow A40.
const Default = "h100-llama2-7b:2,a100-llama3-8b:2,a40-llama2-7b:2"

// GPU is one simulated GPU of the fleet.
type GPU struct {
	ID      string `json:"id"`
	Profile string `json:"profile"`
	Addr    string `json:"addr"`
	// SaturationRate is what the GPU sustains alone on the workload (req/s
	// of GPU time), found by gpusim's virtual-time saturation search.
	SaturationRate float64 `json:"saturation_rate"`
	// Cap is the router's max_concurrency for it; see SizeFleet. CapLoad
	// is the share of the saturation rate it was sized at.
	Cap     int     `json:"max_concurrency"`
	CapLoad float64 `json:"cap_load"`
	// BatchLimit is the engine's own limit on the sequences in a batch
	// (gpusim's max_num_seqs, as vLLM names it): the cap of Setup caps
	// CapsBatchLimit.
	BatchLimit int `json:"max_num_seqs"`
	// CapHeld says which figure of the requests held at CapLoad the cap
	// is: "p99" or "mean", and "mean, SLO unmet" when even capLoadMin
	// left more than 1 % of the requests over the inter-token SLO.
	CapHeld string `json:"cap_held"`
	// KVBlocks and PrefillRate are what an operator configures for the
	// worker (kv_blocks, prefill_tokens_per_second): its KV cache in
	// 16-token blocks and its prefill rate in tokens/s of GPU time, from
	// its profile; see SizeFleet.
	KVBlocks    int     `json:"kv_blocks"`
	PrefillRate float64 `json:"prefill_tokens_per_second"`
}

// Parse reads "profile:count,profile:count"; ids are the profile's
// GPU name and an index (h100-0, h100-1, a100-0, ...).
func Parse(s string) ([]GPU, error) {
	var out []GPU
	seen := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, count, ok := strings.Cut(part, ":")
		n := 1
		if ok {
			var err error
			if n, err = strconv.Atoi(count); err != nil || n < 1 || n > 64 {
				return nil, fmt.Errorf("fleet %q: bad count %q", part, count)
			}
		}
		if _, err := gpusim.LookupProfile(name); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		short, _, _ := strings.Cut(name, "-")
		for i := 0; i < n; i++ {
			out = append(out, GPU{ID: fmt.Sprintf("%s-%d", short, seen[short]), Profile: name})
			seen[short]++
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fleet %q lists no GPU", s)
	}
	return out, nil
}

// Proc is the running gpusim --fleet process.
type Proc struct {
	*stack.Proc
	gpus []GPU
}

// Start starts one gpusim process serving every GPU on its own free
// port, every duration multiplied by slowdown, and waits for them.
func Start(ctx context.Context, binDir, dir string, gpus []GPU, slowdown float64, extra map[string]any) (*Proc, error) {
	addrs := stack.MustFreeAddrs(len(gpus))
	var entries []map[string]any
	for i := range gpus {
		gpus[i].Addr = addrs[i]
		e := map[string]any{
			"id": gpus[i].ID, "listen": addrs[i], "models": []string{loadgen.Model},
			"slowdown": slowdown, "seed": i + 1,
		}
		if gpus[i].Profile != "" {
			e["profile"] = gpus[i].Profile
		}
		for k, v := range extra {
			e[k] = v
		}
		entries = append(entries, e)
	}
	b, err := yaml.Marshal(entries)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fmt.Sprintf("fleet-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	p, err := stack.Start("gpusim fleet", filepath.Join(binDir, "gpusim"), []string{"--fleet", path}, nil)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := stack.WaitTCP(ctx, a, 10*time.Second); err != nil {
			p.Stop(time.Second)
			return nil, fmt.Errorf("gpusim fleet %s: %w\n%s", a, err, p.Log())
		}
	}
	return &Proc{Proc: p, gpus: gpus}, nil
}

// Workers lists the fleet as the router workers of setup s, each with
// its max_concurrency under the setup's caps (Setup.MaxConcurrency; 0:
// no cap).
func Workers(gpus []GPU, s Setup) []config.Worker {
	out := make([]config.Worker, len(gpus))
	for i, g := range gpus {
		out[i] = config.Worker{
			ID: g.ID, Address: g.Addr, Models: []string{loadgen.Model}, MaxConcurrency: s.MaxConcurrency(g),
			KVBlocks: g.KVBlocks, PrefillTokensPerSecond: g.PrefillRate,
		}
	}
	return out
}

// IDs lists the GPUs' ids, in fleet order.
func IDs(gpus []GPU) []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = g.ID
	}
	return out
}
