package redis

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/state"
)

// The Redis store's LoRA adapter placement (state.PlaceAdapter), kept by
// the scripts: per worker a hash ad:<worker> of adapter → "running
// used_ms", per claim that placed one its adapter (cad). claim.lua reads
// and places, every end of a claim (release, lapse) gives its request
// back, move.lua follows a moved claim, and telemetry.lua applies the
// engine's report (state.SyncAdapters).

// adapterFields are the telemetry fields of an engine's adapter report:
// the report itself (lora, JSON) and, for telemetry.lua's sync, the
// adapters it holds (lora_held) and runs or queues (lora_run), each a
// newline-separated list, with its time (lora_t, ms).
func adapterFields(r state.AdapterReport) []any {
	if !r.Known() {
		return nil
	}
	js, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	held := slices.Concat(r.Running, r.Waiting)
	for _, a := range r.Listed {
		held = append(held, a.Name)
	}
	return []any{
		"lora", string(js), "lora_held", strings.Join(held, "\n"),
		"lora_run", strings.Join(slices.Concat(r.Running, r.Waiting), "\n"), "lora_t", r.At.UnixMilli(),
	}
}

func parseAdapterReport(js string) state.AdapterReport {
	var r state.AdapterReport
	if js == "" || json.Unmarshal([]byte(js), &r) != nil {
		return state.AdapterReport{}
	}
	return r
}

// parsePlacements reads a worker's ad:<worker> hash, sorted by name.
func parsePlacements(kvs [][2]string) []state.AdapterPlacement {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]state.AdapterPlacement, 0, len(kvs))
	for _, kv := range kvs {
		active, used, _ := strings.Cut(kv[1], " ")
		a, _ := strconv.Atoi(active)
		ms, _ := strconv.ParseInt(used, 10, 64)
		p := state.AdapterPlacement{Name: kv[0], Active: a}
		if ms > 0 {
			p.Used = time.UnixMilli(ms)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b state.AdapterPlacement) int { return strings.Compare(a.Name, b.Name) })
	return out
}
