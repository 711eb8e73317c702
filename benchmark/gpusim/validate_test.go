package gpusim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadTrace(t *testing.T) {
	tests := []struct {
		name, csv string
		limit     int
		want      []SimRequest
		wantErr   string
	}{
		{
			name: "vidur columns", limit: 0,
			csv:  "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n1.5,396,0\n",
			want: []SimRequest{{0, 374, 44, nil, false}, {1500 * time.Millisecond, 396, 1, nil, false}},
		},
		{
			name: "reordered, limited", limit: 2,
			csv:  "num_decode_tokens,arrived_at,num_prefill_tokens\n5,0,10\n6,2,20\n7,3,30\n",
			want: []SimRequest{{0, 10, 5, nil, false}, {2 * time.Second, 20, 6, nil, false}},
		},
		{name: "missing column", csv: "arrived_at,num_prefill_tokens\n0,1\n", wantErr: "num_decode_tokens"},
		{name: "bad row", csv: "arrived_at,num_prefill_tokens,num_decode_tokens\n0,x,1\n1,1,1\n", wantErr: "line 2"},
		{name: "too short", csv: "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n", wantErr: "fewer than 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadTrace(strings.NewReader(tt.csv), tt.limit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v err %v", got, err)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tt.want[i]) {
					t.Errorf("row %d: %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestRescale(t *testing.T) {
	reqs := []SimRequest{{10 * time.Second, 1, 1, nil, false}, {12 * time.Second, 1, 1, nil, false}, {20 * time.Second, 1, 1, nil, false}}
	got := Rescale(reqs, 4) // mean gap 5 s becomes 0.25 s: times scale by 1/20
	want := []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond}
	for i := range got {
		if got[i].Arrival != want[i] {
			t.Errorf("arrival %d = %v, want %v", i, got[i].Arrival, want[i])
		}
	}
}

// convTrace finds the Azure conversation trace in the repository
// (benchmark/traces), or at $GPUSIM_TRACE.
func convTrace(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GPUSIM_TRACE"); p != "" {
		return p
	}
	p := filepath.Join("..", "traces", "azure-conv-2023.csv")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("trace not found (%v): it is vendored in benchmark/traces; set GPUSIM_TRACE to use another copy", err)
	}
	return p
}

// TestSaturationAzureConv replays the first 2,000 requests of the Azure
// conversation trace on one simulated A100 running Llama-3-8B and compares
// the saturation rate with the published reference of about 6.45 req/s.
func TestSaturationAzureConv(t *testing.T) {
	reqs, err := LoadTraceFile(convTrace(t), 2000)
	if err != nil {
		t.Fatal(err)
	}
	cfg := simConfig(func(c *Config) { c.Profile = "a100-llama3-8b" })
	v, err := FindSaturation(cfg, reqs, DefaultValidateOptions())
	if err != nil {
		t.Fatal(err)
	}
	const reference = 6.45
	t.Logf("saturation %.2f req/s (reference %.2f, ratio %.2f) after %d replays", v.SaturationRate, reference, v.SaturationRate/reference, len(v.Runs))
	// The per-step host time (profile.go) brought this from 7.75 (+20 %) to
	// 6.66 (+3 %); 10 % is the calibration's promise.
	if v.SaturationRate < 0.9*reference || v.SaturationRate > 1.1*reference {
		t.Errorf("saturation %.2f req/s is more than 10%% off the reference %.2f", v.SaturationRate, reference)
	}
	below, err := ReplayAt(cfg, reqs, v.SaturationRate/2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	above, err := ReplayAt(cfg, reqs, v.SaturationRate*1.5, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if below.P50TTFT > 500*time.Millisecond || above.Sustainable || above.Throughput >= v.SaturationRate*1.5 {
		t.Errorf("below: %+v\nabove: %+v", below, above)
	}
}
