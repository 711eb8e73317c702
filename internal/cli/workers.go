package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
)

// call sends a JSON request of the admin API and decodes the answer into
// out (protojson, the standard mapping).
func (c *Client) call(ctx context.Context, method, path string, in, out proto.Message) error {
	var body io.Reader
	if in != nil {
		b, err := protojson.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	var raw jsonRaw
	if err := c.do(ctx, method, path, body, &raw); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(raw, out)
}

// jsonRaw keeps an answer's bytes for protojson.
type jsonRaw []byte

func (j *jsonRaw) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}

// Workers lists the fleet.
func (c *Client) Workers(ctx context.Context, model string) ([]*pb.Worker, error) {
	path := "/v1/workers"
	if model != "" {
		path += "?model=" + url.QueryEscape(model)
	}
	var out pb.ListWorkersResponse
	if err := c.call(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.GetWorkers(), nil
}

// Worker returns one worker.
func (c *Client) Worker(ctx context.Context, id string) (*pb.Worker, error) {
	var out pb.Worker
	if err := c.call(ctx, http.MethodGet, "/v1/workers/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, notFound(err, "worker", id)
	}
	return &out, nil
}

// Register registers a worker with a lease.
func (c *Client) Register(ctx context.Context, spec *pb.WorkerSpec, lease time.Duration) (*pb.RegisterWorkerResponse, error) {
	var out pb.RegisterWorkerResponse
	err := c.call(ctx, http.MethodPost, "/v1/workers", &pb.RegisterWorkerRequest{Spec: spec, Lease: durationpb.New(lease)}, &out)
	return &out, err
}

// Heartbeat extends a registered worker's lease.
func (c *Client) Heartbeat(ctx context.Context, id string, lease time.Duration) error {
	err := c.call(ctx, http.MethodPost, "/v1/workers/"+url.PathEscape(id)+":heartbeat", &pb.HeartbeatRequest{Lease: durationpb.New(lease)}, nil)
	return notFound(err, "worker", id)
}

// Deregister removes a worker.
func (c *Client) Deregister(ctx context.Context, id string) error {
	return notFound(c.call(ctx, http.MethodDelete, "/v1/workers/"+url.PathEscape(id), nil, nil), "worker", id)
}

// SetDrain drains or undrains a worker.
func (c *Client) SetDrain(ctx context.Context, id string, drain bool) (*pb.Worker, error) {
	verb := ":undrain"
	if drain {
		verb = ":drain"
	}
	var out pb.Worker
	if err := c.call(ctx, http.MethodPost, "/v1/workers/"+url.PathEscape(id)+verb, nil, &out); err != nil {
		return nil, notFound(err, "worker", id)
	}
	return &out, nil
}

// Stats returns the fleet at a glance.
func (c *Client) Stats(ctx context.Context) (*pb.Stats, error) {
	var out pb.Stats
	err := c.call(ctx, http.MethodGet, "/v1/stats", nil, &out)
	return &out, err
}

func notFound(err error, what, id string) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("unknown %s %q: %w", what, id, ErrNotFound)
	}
	return err
}

// WaitDrained polls until the worker has no request in flight, or the
// timeout passes.
func (c *Client) WaitDrained(ctx context.Context, id string, timeout time.Duration, progress io.Writer) error {
	deadline := time.Now().Add(timeout)
	last := int32(-1)
	for {
		w, err := c.Worker(ctx, id)
		if err != nil {
			return err
		}
		if w.GetInFlight() == 0 {
			return nil
		}
		if w.GetInFlight() != last && progress != nil {
			fmt.Fprintf(progress, "%s: %d in flight\n", id, w.GetInFlight())
			last = w.GetInFlight()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s to drain: %d requests still in flight", timeout, id, w.GetInFlight())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PrintWorkers writes the fleet as a table.
func PrintWorkers(w io.Writer, ws []*pb.Worker) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tMODELS\tHEALTH\tDRAINING\tIN FLIGHT\tSOURCE\tLATENCY\tTTFT\tTOKENS/S\tKV\tREQUESTS\tERRORS")
	for _, x := range ws {
		src := x.GetSource()
		if x.GetLeaseExpires() != nil {
			src += fmt.Sprintf(" (lease %s)", time.Until(x.GetLeaseExpires().AsTime()).Round(time.Second))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n",
			x.GetSpec().GetId(), x.GetSpec().GetAddress(), strings.Join(x.GetSpec().GetModels(), ","),
			x.GetHealth(), x.GetDraining(), x.GetInFlight(), x.GetSpec().GetMaxConcurrency(), src,
			secs(x.GetLatencySeconds()), secs(x.GetTtftSeconds()), num(x.GetTokensPerSecond()), kv(x),
			x.GetRequests(), x.GetErrors())
	}
	_ = tw.Flush()
}

func secs(a *pb.MovingAverage) string {
	if a == nil {
		return "-"
	}
	return time.Duration(a.GetValue() * float64(time.Second)).Round(time.Millisecond).String()
}

func num(a *pb.MovingAverage) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", a.GetValue())
}

func kv(x *pb.Worker) string {
	if x.GetScrapedAt() == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x.GetKvUsage())
}

// PrintStats writes the fleet summary and its queues.
func PrintStats(w io.Writer, s *pb.Stats) {
	fmt.Fprintf(w, "replica %s  strategy %s  status %s\n\n", s.GetReplica(), s.GetStrategy(), s.GetStatus())
	PrintWorkers(w, s.GetWorkers())
	if len(s.GetQueues()) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "QUEUE\tCRITICAL\tSTANDARD\tBATCH")
		for _, q := range s.GetQueues() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", q.GetModel(), q.GetCritical(), q.GetStandard(), q.GetBatch())
		}
		_ = tw.Flush()
	}
}

// PrintProto writes a message as indented JSON (the standard mapping).
func PrintProto(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Indent: "  ", EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
