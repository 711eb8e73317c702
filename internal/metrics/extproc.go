package metrics

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// countedStreams is an ext_proc server whose open streams are counted in
// llm_router_extproc_streams_active.
type countedStreams struct {
	extprocv3.ExternalProcessorServer
	m *Metrics
}

var _ extprocv3.ExternalProcessorServer = countedStreams{}

// CountStreams wraps srv so that its open streams (one per HTTP request in
// flight through Envoy) are counted on m.
func (m *Metrics) CountStreams(srv extprocv3.ExternalProcessorServer) extprocv3.ExternalProcessorServer {
	return countedStreams{srv, m}
}

func (c countedStreams) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	c.m.ExtProcStreamsActive.Inc()
	defer c.m.ExtProcStreamsActive.Dec()
	return c.ExternalProcessorServer.Process(stream)
}
