package metrics_test

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/llm-router/llm-router/internal/metrics"
)

// streamServer reads the open-streams gauge from inside a stream.
type streamServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	m      *metrics.Metrics
	during float64
}

func (s *streamServer) Process(extprocv3.ExternalProcessor_ProcessServer) error {
	s.during = value(s.m.ExtProcStreamsActive)
	return nil
}

func TestCountStreamsCountsOpenStreams(t *testing.T) {
	m := metrics.New()
	srv := &streamServer{m: m}
	if err := m.CountStreams(srv).Process(nil); err != nil {
		t.Fatal(err)
	}
	if srv.during != 1 {
		t.Errorf("%v streams open during a stream, want 1", srv.during)
	}
	if after := value(m.ExtProcStreamsActive); after != 0 {
		t.Errorf("%v streams open after it ended, want 0", after)
	}
}
