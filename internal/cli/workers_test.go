package cli

import (
	"strings"
	"testing"

	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
)

// A worker with no max_concurrency shows "none" as its cap, not 0.
func TestPrintWorkersShowsNoCapAsNone(t *testing.T) {
	var b strings.Builder
	PrintWorkers(&b, []*pb.Worker{
		{Spec: &pb.WorkerSpec{Id: "free", Address: "10.0.0.1:8000", Models: []string{"m"}}, InFlight: 3},
		{Spec: &pb.WorkerSpec{Id: "capped", Address: "10.0.0.2:8000", Models: []string{"m"}, MaxConcurrency: 8}, InFlight: 2},
	})
	out := b.String()
	if !strings.Contains(out, "3/none") || !strings.Contains(out, "2/8") {
		t.Fatalf("workers table:\n%s\nwant 3/none and 2/8", out)
	}
}
