package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
)

// api calls the admin API with its generated gRPC client, on the admin
// port (the same one that serves HTTP), the token sent as metadata.
func (c *Client) api(ctx context.Context, call func(context.Context, pb.AdminServiceClient) error) error {
	target := c.Base
	if u, err := url.Parse(c.Base); err == nil && u.Host != "" {
		target = u.Host
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("bad --admin address %q: %w", c.Base, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if c.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.Token)
	}
	return c.rpcError(call(ctx, pb.NewAdminServiceClient(conn)))
}

// rpcError turns a gRPC failure into a message that says what went wrong.
func (c *Client) rpcError(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, st.Message())
	case codes.Unauthenticated, codes.PermissionDenied:
		return ErrUnauthorised
	case codes.DeadlineExceeded:
		return fmt.Errorf("timed out talking to %s", c.Base)
	case codes.Unavailable:
		if strings.Contains(st.Message(), "connection refused") {
			return fmt.Errorf("connection refused: no router admin listening at %s", c.Base)
		}
	}
	return fmt.Errorf("%s: %s", strings.ToLower(st.Code().String()), st.Message())
}

// Workers lists the fleet.
func (c *Client) Workers(ctx context.Context, model string) ([]*pb.Worker, error) {
	var out *pb.ListWorkersResponse
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		out, err = api.ListWorkers(ctx, &pb.ListWorkersRequest{Model: model})
		return err
	})
	return out.GetWorkers(), err
}

// Worker returns one worker.
func (c *Client) Worker(ctx context.Context, id string) (*pb.Worker, error) {
	var out *pb.Worker
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		out, err = api.GetWorker(ctx, &pb.GetWorkerRequest{Id: id})
		return err
	})
	return out, notFound(err, "worker", id)
}

// Register registers a worker with a lease.
func (c *Client) Register(ctx context.Context, spec *pb.WorkerSpec, lease time.Duration) (*pb.RegisterWorkerResponse, error) {
	var out *pb.RegisterWorkerResponse
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		out, err = api.RegisterWorker(ctx, &pb.RegisterWorkerRequest{Spec: spec, Lease: durationpb.New(lease)})
		return err
	})
	return out, err
}

// Heartbeat extends a registered worker's lease.
func (c *Client) Heartbeat(ctx context.Context, id string, lease time.Duration) error {
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) error {
		_, err := api.Heartbeat(ctx, &pb.HeartbeatRequest{Id: id, Lease: durationpb.New(lease)})
		return err
	})
	return notFound(err, "worker", id)
}

// Deregister removes a worker.
func (c *Client) Deregister(ctx context.Context, id string) error {
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) error {
		_, err := api.DeregisterWorker(ctx, &pb.DeregisterWorkerRequest{Id: id})
		return err
	})
	return notFound(err, "worker", id)
}

// SetDrain drains or undrains a worker.
func (c *Client) SetDrain(ctx context.Context, id string, drain bool) (*pb.Worker, error) {
	var out *pb.Worker
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		if drain {
			out, err = api.DrainWorker(ctx, &pb.DrainWorkerRequest{Id: id})
		} else {
			out, err = api.UndrainWorker(ctx, &pb.UndrainWorkerRequest{Id: id})
		}
		return err
	})
	return out, notFound(err, "worker", id)
}

// Stats returns the fleet at a glance.
func (c *Client) Stats(ctx context.Context) (*pb.Stats, error) {
	var out *pb.Stats
	err := c.api(ctx, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		out, err = api.GetStats(ctx, &pb.GetStatsRequest{})
		return err
	})
	return out, err
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
	fmt.Fprintln(tw, "ID\tADDRESS\tMODELS\tROLE\tHEALTH\tDRAINING\tIN FLIGHT\tSOURCE\tLATENCY\tTTFT\tTOKENS/S\tKV\tREQUESTS\tERRORS")
	for _, x := range ws {
		src := x.GetSource()
		if x.GetLeaseExpires() != nil {
			src += fmt.Sprintf(" (lease %s)", time.Until(x.GetLeaseExpires().AsTime()).Round(time.Second))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%d/%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n",
			x.GetSpec().GetId(), x.GetSpec().GetAddress(), strings.Join(x.GetSpec().GetModels(), ","), role(x),
			x.GetHealth(), x.GetDraining(), x.GetInFlight(), CapString(int(x.GetSpec().GetMaxConcurrency())), src,
			secs(x.GetLatencySeconds()), secs(x.GetTtftSeconds()), num(x.GetTokensPerSecond()), kv(x),
			x.GetRequests(), x.GetErrors())
	}
	_ = tw.Flush()
}

// role is the worker's role as shown to operators: both when unset.
func role(x *pb.Worker) string {
	if r := x.GetSpec().GetRole(); r != "" {
		return r
	}
	return "both"
}

// CapString is a concurrency cap as shown to operators: "none" for 0.
func CapString(c int) string {
	if c <= 0 {
		return "none"
	}
	return strconv.Itoa(c)
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
