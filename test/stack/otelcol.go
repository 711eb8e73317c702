package stack

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CollectorBinary returns $OTELCOL_BIN, else builds the test collector
// (test/otelcol, a module of its own: the OpenTelemetry Collector with the
// OTLP receiver and the file exporter) into dir. The Go build cache makes
// every build after the first a link.
func CollectorBinary(dir string) (string, error) {
	if bin := os.Getenv("OTELCOL_BIN"); bin != "" {
		return bin, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "otelcol")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "test", "otelcol")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build test/otelcol: %w\n%s", err, b)
	}
	return bin, nil
}

// Collector is a running OpenTelemetry Collector that receives OTLP over
// gRPC and HTTP on loopback and writes every span it receives to a file,
// as OTLP JSON.
type Collector struct {
	*Proc
	GRPCAddr string // host:port of the OTLP/gRPC receiver
	HTTPAddr string // host:port of the OTLP/HTTP receiver
	file     string
}

// StartCollector starts the collector bin with a configuration written in
// dir, on free ports, and waits for both receivers.
func StartCollector(ctx context.Context, bin, dir string) (*Collector, error) {
	addrs := MustFreeAddrs(2)
	c := &Collector{GRPCAddr: addrs[0], HTTPAddr: addrs[1], file: filepath.Join(dir, "spans.jsonl")}
	conf := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
      http: {endpoint: %q}
exporters:
  file:
    path: %q
    flush_interval: 50ms
service:
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
  pipelines:
    traces: {receivers: [otlp], exporters: [file]}
`, c.GRPCAddr, c.HTTPAddr, c.file)
	path := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	p, err := Start("otelcol", bin, []string{"--config", "file:" + path}, nil)
	if err != nil {
		return nil, err
	}
	c.Proc = p
	for _, addr := range []string{c.GRPCAddr, c.HTTPAddr} {
		if err := WaitTCP(ctx, addr, 15*time.Second); err != nil {
			p.Stop(time.Second)
			return nil, fmt.Errorf("otelcol %s: %w\n%s", addr, err, tail(p.Log(), 3000))
		}
	}
	return c, nil
}

// Span is one span as the collector received it.
type Span struct {
	Service      string // the resource's service.name
	TraceID      string // hex
	SpanID       string
	ParentSpanID string // "" for a root span
	Name         string
	Kind         int            // OTLP SpanKind: 1 internal, 2 server, 3 client
	Attributes   map[string]any // string, int64, float64, bool or []any
}

// Spans reads every span the collector has written so far.
func (c *Collector) Spans() ([]Span, error) {
	f, err := os.Open(c.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Span
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var req otlpTraces
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return nil, fmt.Errorf("otelcol output: %w", err)
		}
		for _, rs := range req.ResourceSpans {
			service, _ := attributes(rs.Resource.Attributes)["service.name"].(string)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, Span{
						Service: service, TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID,
						Name: s.Name, Kind: s.Kind, Attributes: attributes(s.Attributes),
					})
				}
			}
		}
	}
	return out, sc.Err()
}

// otlpTraces is the OTLP JSON encoding of an export request, as far as
// the tests read it.
type otlpTraces struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpKeyValue `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID      string         `json:"traceId"`
				SpanID       string         `json:"spanId"`
				ParentSpanID string         `json:"parentSpanId"`
				Name         string         `json:"name"`
				Kind         int            `json:"kind"`
				Attributes   []otlpKeyValue `json:"attributes"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpKeyValue struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpValue struct {
	String *string         `json:"stringValue"`
	Int    json.RawMessage `json:"intValue"` // int64, as a JSON string or number
	Double *float64        `json:"doubleValue"`
	Bool   *bool           `json:"boolValue"`
	Array  *struct {
		Values []otlpValue `json:"values"`
	} `json:"arrayValue"`
}

func (v otlpValue) value() any {
	switch {
	case v.String != nil:
		return *v.String
	case v.Int != nil:
		n, _ := strconv.ParseInt(strings.Trim(string(v.Int), `"`), 10, 64)
		return n
	case v.Double != nil:
		return *v.Double
	case v.Bool != nil:
		return *v.Bool
	case v.Array != nil:
		out := make([]any, len(v.Array.Values))
		for i, e := range v.Array.Values {
			out[i] = e.value()
		}
		return out
	}
	return nil
}

func attributes(kvs []otlpKeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = kv.Value.value()
	}
	return out
}
