package gpusim

import (
	"strings"
	"testing"
	"time"
)

func TestStepTimeMonotonic(t *testing.T) {
	for _, name := range ProfileNames() {
		t.Run(name, func(t *testing.T) {
			p, err := LookupProfile(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, ctx := range []int{0, 10_000, 300_000} {
				for _, seqs := range []int{1, 64, 256} {
					prev := time.Duration(0)
					for tok := 1; tok <= 16384; tok++ {
						d := p.StepTime(tok, ctx, seqs)
						if d < prev {
							t.Fatalf("ctx %d seqs %d: step(%d)=%v < step(%d)=%v", ctx, seqs, tok, d, tok-1, prev)
						}
						prev = d
					}
				}
			}
			// More sequences for the same tokens never make a step faster.
			prev := time.Duration(0)
			for seqs := 0; seqs <= 1024; seqs++ {
				d := p.StepTime(1024, 50_000, seqs)
				if d < prev {
					t.Fatalf("step with %d seqs = %v < %v with %d", seqs, d, prev, seqs-1)
				}
				prev = d
			}
		})
	}
}

func TestLinearTimeMatchesProfile(t *testing.T) {
	// Rows of the facts table: tokens in batch -> ms.
	tests := []struct {
		profile string
		tokens  int
		wantMs  float64
	}{
		{"a100-llama3-8b", 1, 9.699},
		{"a100-llama3-8b", 512, 34.667},
		{"a100-llama3-8b", 4096, 273.81},
		{"a100-llama3-8b", 768, (34.667 + 75.199) / 2}, // interpolated
		{"h100-llama2-7b", 2, 5.602},                   // dip in the profile smoothed away
		{"h100-llama2-7b", 1024, 21.054},
		{"a40-llama2-7b", 64, 30.053},
		{"a40-llama2-7b", 8192, 523.082 + (523.082-259.591)*2}, // extrapolated
	}
	for _, tt := range tests {
		p, err := LookupProfile(tt.profile)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(p.LinearTime(tt.tokens)) / float64(time.Millisecond)
		if diff := got - tt.wantMs; diff > 0.001 || diff < -0.001 {
			t.Errorf("%s LinearTime(%d) = %.3f ms, want %.3f", tt.profile, tt.tokens, got, tt.wantMs)
		}
	}
}

func TestCPUTime(t *testing.T) {
	p, err := LookupProfile("a100-llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		seqs int
		want time.Duration
	}{
		{0, 0},
		{1, 3*time.Millisecond + 40*time.Microsecond},
		{64, 3*time.Millisecond + 64*40*time.Microsecond},
	}
	for _, tt := range tests {
		if got := p.CPUTime(tt.seqs); got != tt.want {
			t.Errorf("CPUTime(%d) = %v, want %v", tt.seqs, got, tt.want)
		}
	}
	if got, want := p.StepTime(512, 0, 1), p.LinearTime(512)+p.CPUTime(1); got != want {
		t.Errorf("StepTime(512, 0, 1) = %v, want linear + cpu = %v", got, want)
	}
}

func TestKVCapacity(t *testing.T) {
	tests := []struct {
		profile  string
		min, max int
	}{
		{"a100-llama3-8b", 380_000, 460_000}, // the facts say roughly 400k
		{"h100-llama2-7b", 100_000, 120_000},
		{"a40-llama2-7b", 45_000, 60_000},
	}
	for _, tt := range tests {
		p, _ := LookupProfile(tt.profile)
		got := p.KVCapacityTokens(0.9, blockSize)
		if got < tt.min || got > tt.max || got%blockSize != 0 {
			t.Errorf("%s capacity = %d tokens, want in [%d, %d], whole blocks", tt.profile, got, tt.min, tt.max)
		}
		t.Logf("%s: %d KV tokens", tt.profile, got)
	}
	p, _ := LookupProfile("a40-llama2-7b")
	if got := p.KVCapacityTokens(0.2, blockSize); got != 0 {
		t.Errorf("capacity at 20%% memory = %d, want 0", got)
	}
	if got := p.AttentionTime(1_000_000); got < 700*time.Millisecond || got > 800*time.Millisecond {
		t.Errorf("A40 reading 1M tokens of 512 KiB = %v, want ~750ms", got)
	}
}

func TestParseProfilesErrors(t *testing.T) {
	tests := []struct{ name, csv string }{
		{"missing rows", "gpu,model,tensor_parallel,tokens_in_batch,linear_layers_ms_per_forward\n"},
		{"bad number", "gpu,model,tensor_parallel,tokens_in_batch,linear_layers_ms_per_forward\nh100,Llama-2-7b-hf,1,x,1\n"},
	}
	for _, tt := range tests {
		if _, err := parseProfiles(strings.NewReader(tt.csv), profileSpecs); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := LookupProfile("b200-llama"); err == nil {
		t.Error("unknown profile accepted")
	}
}
