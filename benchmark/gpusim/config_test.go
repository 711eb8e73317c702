package gpusim

import (
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{
			name: "defaults",
			args: []string{"--listen", ":8000", "--model", "m"},
			check: func(t *testing.T, c Config) {
				if c.ID != ":8000" || c.TokensPerSecond != 50 || c.TTFTMs != 50 || c.MetricsFormat != "vllm" || c.Calibrated() {
					t.Errorf("bad defaults: %+v", c)
				}
			},
		},
		{
			name: "repeated and comma models",
			args: []string{"--listen", ":1", "--model", "a,b", "--model", "c", "--id", "w1"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.Models, []string{"a", "b", "c"}) || c.ID != "w1" {
					t.Errorf("models %v id %q", c.Models, c.ID)
				}
			},
		},
		{
			name: "calibrated",
			args: []string{"--listen", ":1", "--model", "m", "--profile", "h100-llama2-7b", "--max-num-seqs", "64", "--max-batched-tokens", "1024"},
			check: func(t *testing.T, c Config) {
				if !c.Calibrated() || c.MaxNumSeqs != 64 || c.MaxBatchedTokens != 1024 {
					t.Errorf("%+v", c)
				}
			},
		},
		{name: "no listen", args: []string{"--model", "m"}, wantErr: "listen"},
		{name: "no model", args: []string{"--listen", ":1"}, wantErr: "model"},
		{name: "duplicate model", args: []string{"--listen", ":1", "--model", "m,m"}, wantErr: "twice"},
		{name: "bad profile", args: []string{"--listen", ":1", "--model", "m", "--profile", "tpu"}, wantErr: "unknown profile"},
		{name: "bad format", args: []string{"--listen", ":1", "--model", "m", "--metrics-format", "tgi"}, wantErr: "metrics_format"},
		{name: "bad error rate", args: []string{"--listen", ":1", "--model", "m", "--error-rate", "2"}, wantErr: "error_rate"},
		{name: "bad slowdown", args: []string{"--listen", ":1", "--model", "m", "--slowdown", "0"}, wantErr: "slowdown"},
		{
			name: "slowdown",
			args: []string{"--listen", ":1", "--model", "m", "--slowdown", "4"},
			check: func(t *testing.T, c Config) {
				if c.Slowdown != 4 {
					t.Errorf("slowdown %v, want 4", c.Slowdown)
				}
			},
		},
		{
			name: "prefix cache off, stream summary on",
			args: []string{"--listen", ":1", "--model", "m", "--prefix-cache=false", "--stream-summary"},
			check: func(t *testing.T, c Config) {
				if c.PrefixCache || !c.StreamSummary {
					t.Errorf("prefix cache %v, stream summary %v", c.PrefixCache, c.StreamSummary)
				}
			},
		},
		{name: "stray arg", args: []string{"--listen", ":1", "--model", "m", "extra"}, wantErr: "unexpected"},
		{name: "fleet and listen", args: []string{"--fleet", "testdata/fleet-example.yaml", "--listen", ":1"}, wantErr: "per GPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgs, err := ParseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(cfgs) != 1 {
				t.Fatalf("cfgs %v err %v", cfgs, err)
			}
			tt.check(t, cfgs[0])
		})
	}
}

func TestFleetExample(t *testing.T) {
	cfgs, err := ParseFlags([]string{"--fleet", "testdata/fleet-example.yaml", "--seed", "100", "--tokens-per-second", "70"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 5 {
		t.Fatalf("%d gpus, want 5", len(cfgs))
	}
	byID := map[string]Config{}
	for _, c := range cfgs {
		byID[c.ID] = c
		if _, err := newEngine(c, realClock{}); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
	tests := []struct {
		id   string
		got  any
		want any
	}{
		{"a100-0", byID["a100-0"].Profile, "a100-llama3-8b"},
		{"a100-0", byID["a100-0"].MetricsFormat, "vllm-v1"},
		{"a100-1", byID["a100-1"].MaxBatchedTokens, 512},         // default
		{"a100-1", byID["a100-1"].Seed, int64(101)},              // --seed plus index
		{"a40-0", byID["a40-0"].TokensPerSecond, 70.0},           // command-line default
		{"llamacpp-0", byID["llamacpp-0"].Slots, 4},              // llama.cpp mode
		{"llamacpp-0", byID["llamacpp-0"].TokensPerSecond, 30.0}, // entry beats flag
		{"flaky-0", byID["flaky-0"].Models, []string{"llama-3-8b", "llama-2-7b"}},
		{"flaky-0", byID["flaky-0"].Seed, int64(42)},
		{"flaky-0", byID["flaky-0"].LoadingMs, 2000},
		{"a100-0", byID["a100-0"].PrefixCache, true}, // default
		{"a100-1", byID["a100-1"].PrefixCache, false},
		{"flaky-0", byID["flaky-0"].StreamSummary, true},
		{"a100-0", byID["a100-0"].StreamSummary, false}, // default
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.id, tt.got, tt.want)
		}
	}
}

func TestParseFleetErrors(t *testing.T) {
	base := DefaultConfig()
	tests := []struct{ name, yaml, wantErr string }{
		{"empty", "[]", "no GPU"},
		{"not a list", "id: x", "parse fleet"},
		{"unknown field", "- listen: :1\n  models: [m]\n  tokens_per_sec: 3\n", "tokens_per_sec"},
		{"duplicate listen", "- listen: :1\n  models: [m]\n  id: a\n- listen: :1\n  models: [m]\n  id: b\n", "twice"},
		{"invalid entry", "- listen: :1\n", "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFleet([]byte(tt.yaml), base)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := os.Stat("testdata/fleet-example.yaml"); err != nil {
		t.Fatal(err)
	}
}
