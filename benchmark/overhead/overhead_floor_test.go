package overhead

import (
	"context"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/stats"
)

func TestFloorPointsAndAims(t *testing.T) {
	targets := []overheadTarget{{name: configDirect}, {name: configNoop, extproc: "noop-extproc"}, {name: configRouter, extproc: "llm-router"}}
	step := func(p50, p99, cpu float64, proc string) OpenStep {
		s := OpenStep{P50: p50, P99: p99, Sent: 1000}
		if proc != "" {
			s.CPU = []host.CPUUse{{Name: "envoy", Seconds: 9}, {Name: proc, Seconds: cpu}}
		}
		return s
	}
	p := RatePoint{Rate: 500, Bytes: 1 << 10}
	// Envoy alone drifts between rounds; the added latency is taken
	// within each round.
	rounds := [][]OpenStep{
		{step(1, 2, 0, ""), step(1.5, 3, 0.05, "noop-extproc"), step(1.6, 4, 0.04, "llm-router")},
		{step(2, 3, 0, ""), step(2.4, 4, 0.05, "noop-extproc"), step(2.6, 6, 0.05, "llm-router")},
		{step(1, 2, 0, ""), step(1.4, 3, 0.05, "noop-extproc"), step(1.8, 4.5, 0.06, "llm-router")},
	}
	fs := floorPoints(p, targets, rounds)
	if len(fs) != 2 || fs[0].Config != configNoop || fs[1].Config != configRouter {
		t.Fatalf("floor points %+v", fs)
	}
	r := fs[1]
	near := func(name string, got, want float64) {
		t.Helper()
		if got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("router added p50 median", r.AddedP50.Median, 0.6)
	near("router p50 ratio min", r.P50Ratio.Min, 0.6/0.5)
	near("router p50 ratio median", r.P50Ratio.Median, 1.5)
	near("router p50 ratio max", r.P50Ratio.Max, 0.8/0.4)
	near("router p99 ratio median", r.P99Ratio.Median, 2.5)
	near("router cpu µs median", r.CPUMicros.Median, 50)
	near("no-op cpu µs median", fs[0].CPUMicros.Median, 50)
	if len(fs[0].P50Ratio.Rounds) != 0 {
		t.Errorf("the no-op has a ratio to itself: %+v", fs[0].P50Ratio)
	}

	rep := &OpenReport{Floor: fs, Sustained: []SustainedRate{
		{Config: configNoop, Bytes: 1 << 10, Rate: 1000},
		{Config: configRouter, Bytes: 1 << 10, Rate: 500},
		{Config: configNoop, Bytes: 256 << 10, Rate: 200, Capped: true},
		{Config: configRouter, Bytes: 256 << 10, Rate: 200, Capped: true},
	}}
	got := map[string]string{}
	for _, a := range aims(rep) {
		got[a.Name] = a.Verdict
	}
	want := map[string]string{
		"1 KB at 500 req/s: router added p50 ÷ no-op's":  stats.NotSettled, // 1.2 .. 2 straddles 1.5
		"1 KB at 500 req/s: router added p99 ÷ no-op's":  stats.NotSettled, // 2 .. 3 touches 2
		"router CPU per 1 KB request":                    stats.Met,        // 40 .. 60
		"highest sustained rate, 1 KB: router ÷ no-op":   stats.Missed,
		"highest sustained rate, 256 KB: router ÷ no-op": stats.NotSettled, // both at the search limit
	}
	if len(got) != len(want) {
		t.Errorf("aims %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("aim %q: %q, want %q", k, got[k], v)
		}
	}
}

// TestNoopExtProc drives the no-op server over real gRPC through the
// phases Envoy sends and checks that the body reply routes the request
// and marks it decided, as the router's does.
func TestNoopExtProc(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeNoopExtProc(ctx, lis, "gpu-0.via.m") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(`{"model":"m"}`), EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{}}},
	}
	var replies []*extprocv3.ProcessingResponse
	for _, r := range reqs {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, resp)
	}
	if replies[0].GetRequestHeaders() == nil || replies[2].GetResponseHeaders() == nil {
		t.Errorf("header replies %v, %v", replies[0], replies[2])
	}
	body := replies[1].GetRequestBody().GetResponse()
	set := body.GetHeaderMutation().GetSetHeaders()
	if len(set) != 1 || set[0].GetHeader().GetKey() != "x-llm-cluster" || string(set[0].GetHeader().GetRawValue()) != "gpu-0.via.m" || !body.GetClearRouteCache() {
		t.Errorf("body reply %v", body)
	}
	decided := replies[1].GetDynamicMetadata().GetFields()["llm_router"].GetStructValue().GetFields()["decided"]
	if !decided.GetBoolValue() {
		t.Errorf("body reply not marked decided: %v", replies[1].GetDynamicMetadata())
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// TestFloorRatioSkipsUnresolvedRounds: a round where noise made the no-op
// look faster than Envoy alone gives no ratio, and too few usable rounds
// give no verdict.
func TestFloorRatioSkipsUnresolvedRounds(t *testing.T) {
	targets := []overheadTarget{{name: configDirect}, {name: configNoop}, {name: configRouter}}
	rounds := [][]OpenStep{
		{{P50: 1, P99: 50}, {P50: 1.5, P99: 3}, {P50: 2, P99: 4}},
		{{P50: 1, P99: 2}, {P50: 1.5, P99: 3}, {P50: 2, P99: 4}},
	}
	fs := floorPoints(RatePoint{Rate: 500, Bytes: 1 << 10}, targets, rounds)
	r := fs[1]
	if len(r.P50Ratio.Rounds) != 2 || len(r.P99Ratio.Rounds) != 1 || r.P99Ratio.Median != 2 {
		t.Fatalf("p50 ratios %v, p99 ratios %v", r.P50Ratio.Rounds, r.P99Ratio.Rounds)
	}
	for _, a := range aims(&OpenReport{Floor: fs}) {
		if a.Verdict != stats.NotSettled {
			t.Errorf("%s: %s on %d rounds", a.Name, a.Verdict, a.Rounds)
		}
	}
}
