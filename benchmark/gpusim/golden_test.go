package gpusim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestMetricsGolden pins the exposition of every format for a fixed state:
// a renamed metric must show up in review.
func TestMetricsGolden(t *testing.T) {
	ms := newModelStats()
	ms.PromptTokens, ms.GenerationTokens, ms.Preemptions, ms.SuccessLength, ms.SuccessStop = 3000, 120, 1, 2, 1
	ms.PrefixQueries, ms.PrefixHits = 3000, 1200
	for _, v := range []float64{0.03, 0.2, 12} {
		ms.TTFT.observe(v)
		ms.E2E.observe(v * 10)
		ms.ITL.observe(v / 2)
	}
	ms.Running, ms.Waiting = 2, 1
	sn := snapshot{
		State: State{
			Running: 2, Waiting: 1, KVUsedTokens: 1024, KVCapacityTokens: 4096, Preemptions: 1, Completed: 3,
			PrefixCacheQueries: 3000, PrefixCacheHits: 1200, CachedBlocks: 100,
		},
		models:        []string{"llama"},
		perModel:      map[string]modelStats{"llama": *ms},
		busyPerStep:   1.5,
		genThroughput: 42,
	}
	for _, f := range metricsFormats {
		t.Run(f, func(t *testing.T) {
			got := renderMetrics(f, sn)
			path := filepath.Join("testdata", "metrics-"+f+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run Golden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("metrics differ from %s:\n%s", path, got)
			}
		})
	}
}
