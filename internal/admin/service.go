package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-router/llm-router/internal/decisions"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// Fleet is what the service reads.
type Fleet interface {
	Snapshot() state.Snapshot
	Strategy() string
	Refresh(ctx context.Context) error
	LastScoreTerms() map[string][]scheduler.ModelTerm
}

// Options configure the service.
type Options struct {
	Replica string
	// Token is the admin credential; empty refuses every change.
	Token string
	// Dynamic reports whether Envoy can reach workers registered at run
	// time (envoy.discovery: xds).
	Dynamic bool
	// ConfigWorkers are the ids from the router's config file.
	ConfigWorkers []string
	Status        func() string
}

// Service implements pb.AdminServiceServer.
type Service struct {
	pb.UnimplementedAdminServiceServer
	store   state.Fleet
	fleet   Fleet
	explain Explainer
	opts    Options
}

var _ pb.AdminServiceServer = (*Service)(nil)

// New returns the service.
func New(store state.Fleet, fleet Fleet, explain Explainer, o Options) *Service {
	if o.Status == nil {
		o.Status = func() string { return "ok" }
	}
	return &Service{store: store, fleet: fleet, explain: explain, opts: o}
}

const (
	defaultLease = 10 * time.Second
	maxLease     = 5 * time.Minute
)

// authorize checks the admin token of a change (Authorization: Bearer).
func (s *Service) authorize(ctx context.Context) error {
	if s.opts.Token == "" {
		return status.Error(codes.PermissionDenied, "no admin token is configured on the router (admin.token or ADMIN_TOKEN): changes are refused")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		scheme, token, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "Bearer") &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.opts.Token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "missing or wrong admin token (Authorization: Bearer <admin token>; client API keys are not admin tokens)")
}

// ListWorkers lists the fleet with live state.
func (s *Service) ListWorkers(_ context.Context, req *pb.ListWorkersRequest) (*pb.ListWorkersResponse, error) {
	snap := s.fleet.Snapshot()
	terms := s.fleet.LastScoreTerms()
	out := &pb.ListWorkersResponse{}
	for _, w := range snap.Workers {
		if req.GetModel() != "" && !slices.Contains(w.Spec.Models, req.GetModel()) {
			continue
		}
		out.Workers = append(out.Workers, s.worker(w, terms[w.Spec.ID]))
	}
	return out, nil
}

// GetWorker returns one worker.
func (s *Service) GetWorker(_ context.Context, req *pb.GetWorkerRequest) (*pb.Worker, error) {
	w, ok := s.find(req.GetId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown worker %q", req.GetId())
	}
	return s.worker(w, s.fleet.LastScoreTerms()[w.Spec.ID]), nil
}

func (s *Service) find(id string) (state.Worker, bool) {
	for _, w := range s.fleet.Snapshot().Workers {
		if w.Spec.ID == id {
			return w, true
		}
	}
	return state.Worker{}, false
}

// fresh rereads the fleet so an answer reflects the change just made.
func (s *Service) fresh(ctx context.Context, id string) (*pb.Worker, error) {
	if err := s.fleet.Refresh(ctx); err != nil {
		return nil, status.Errorf(codes.Unavailable, "reread the fleet: %v", err)
	}
	return s.GetWorker(ctx, &pb.GetWorkerRequest{Id: id})
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// RegisterWorker adds (or refreshes) a worker with a lease.
func (s *Service) RegisterWorker(ctx context.Context, req *pb.RegisterWorkerRequest) (*pb.RegisterWorkerResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if !s.opts.Dynamic {
		return nil, status.Error(codes.FailedPrecondition, "envoy.discovery is static: Envoy could not reach a worker registered at run time; set envoy.discovery: xds and re-render Envoy's config (llm-router envoy-config)")
	}
	spec, err := specFrom(req.GetSpec())
	if err != nil {
		return nil, err
	}
	if slices.Contains(s.opts.ConfigWorkers, spec.ID) {
		return nil, status.Errorf(codes.AlreadyExists, "worker %q is in the router's config file; register another id", spec.ID)
	}
	lease := req.GetLease().AsDuration()
	switch {
	case req.GetLease() == nil || lease == 0:
		lease = defaultLease
	case lease < time.Second || lease > maxLease:
		return nil, status.Errorf(codes.InvalidArgument, "lease must be between 1s and %s, got %s", maxLease, lease)
	}
	if _, err := s.store.RegisterLeased(ctx, spec, lease); err != nil {
		if errors.Is(err, state.ErrPoolMix) {
			return nil, status.Errorf(codes.InvalidArgument, "register %s: %v", spec.ID, err)
		}
		return nil, status.Errorf(codes.Unavailable, "register %s: %v", spec.ID, err)
	}
	w, err := s.fresh(ctx, spec.ID)
	if err != nil {
		return nil, err
	}
	return &pb.RegisterWorkerResponse{Worker: w, HeartbeatInterval: durationpb.New(lease / 3)}, nil
}

func specFrom(p *pb.WorkerSpec) (state.WorkerSpec, error) {
	bad := func(format string, a ...any) (state.WorkerSpec, error) {
		return state.WorkerSpec{}, status.Errorf(codes.InvalidArgument, format, a...)
	}
	switch {
	case p == nil:
		return bad("spec is required")
	case !idPattern.MatchString(p.GetId()) || strings.HasPrefix(p.GetId(), "pool.") || strings.Contains(p.GetId(), ".via."):
		return bad("spec.id %q must be 1-63 letters, digits, '.', '_' or '-', not starting with 'pool.' nor containing '.via.'", p.GetId())
	case len(p.GetModels()) == 0:
		return bad("spec.models: at least one model is required")
	case p.GetMaxConcurrency() < 0:
		return bad("spec.max_concurrency must be 0 (none) or more")
	}
	if _, _, err := net.SplitHostPort(p.GetAddress()); err != nil {
		return bad("spec.address %q: want host:port", p.GetAddress())
	}
	if f := p.GetMetricsFormat(); f != "" && !slices.Contains([]string{"vllm", "sglang", "llamacpp", "trtllm", "none"}, f) {
		return bad("spec.metrics_format %q: want vllm, sglang, llamacpp, trtllm or none", f)
	}
	role, err := state.ParseRole(p.GetRole())
	if err != nil {
		return bad("spec.%v", err)
	}
	return state.WorkerSpec{
		ID: p.GetId(), Address: p.GetAddress(), Models: p.GetModels(), Zone: p.GetZone(), Region: p.GetRegion(),
		MaxConcurrency: int(p.GetMaxConcurrency()), MetricsFormat: p.GetMetricsFormat(), MetricsURL: p.GetMetricsUrl(),
		HealthURL: p.GetHealthUrl(), DCGMURL: p.GetDcgmUrl(), DCGMGPU: p.GetDcgmGpu(), Role: role,
	}, nil
}

// Heartbeat keeps a registered worker's lease.
func (s *Service) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	lease := req.GetLease().AsDuration()
	switch {
	case req.GetLease() == nil || lease == 0:
		lease = defaultLease
	case lease < time.Second || lease > maxLease:
		return nil, status.Errorf(codes.InvalidArgument, "lease must be between 1s and %s, got %s", maxLease, lease)
	}
	exp, err := s.store.Heartbeat(ctx, req.GetId(), lease)
	if err != nil {
		return nil, storeError(err, req.GetId())
	}
	return &pb.HeartbeatResponse{LeaseExpires: timestamppb.New(exp)}, nil
}

// DeregisterWorker removes a worker now.
func (s *Service) DeregisterWorker(ctx context.Context, req *pb.DeregisterWorkerRequest) (*pb.DeregisterWorkerResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := s.store.Deregister(ctx, req.GetId()); err != nil {
		return nil, storeError(err, req.GetId())
	}
	_ = s.fleet.Refresh(ctx)
	return &pb.DeregisterWorkerResponse{}, nil
}

// DrainWorker stops new requests to a worker; in-flight ones finish.
func (s *Service) DrainWorker(ctx context.Context, req *pb.DrainWorkerRequest) (*pb.Worker, error) {
	return s.setDrain(ctx, req.GetId(), true)
}

// UndrainWorker lets a drained worker take requests again.
func (s *Service) UndrainWorker(ctx context.Context, req *pb.UndrainWorkerRequest) (*pb.Worker, error) {
	return s.setDrain(ctx, req.GetId(), false)
}

func (s *Service) setDrain(ctx context.Context, id string, draining bool) (*pb.Worker, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := s.store.SetDraining(ctx, id, draining); err != nil {
		return nil, storeError(err, id)
	}
	return s.fresh(ctx, id)
}

func storeError(err error, id string) error {
	if errors.Is(err, state.ErrUnknownWorker) {
		return status.Errorf(codes.NotFound, "unknown worker %q: %v", id, err)
	}
	return status.Errorf(codes.Unavailable, "%s: %v", id, err)
}

// ExplainDecision returns the decision made for a request id.
func (s *Service) ExplainDecision(ctx context.Context, req *pb.ExplainDecisionRequest) (*pb.Decision, error) {
	d, err := s.explain.Explain(ctx, req.GetRequestId())
	if err != nil {
		if errors.Is(err, decisions.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "no decision recorded for request %q", req.GetRequestId())
		}
		return nil, status.Errorf(codes.Unavailable, "explain %s: %v", req.GetRequestId(), err)
	}
	return decision(d), nil
}

// GetStats returns the fleet at a glance.
func (s *Service) GetStats(ctx context.Context, _ *pb.GetStatsRequest) (*pb.Stats, error) {
	list, _ := s.ListWorkers(ctx, &pb.ListWorkersRequest{})
	out := &pb.Stats{Replica: s.opts.Replica, Strategy: s.fleet.Strategy(), Status: s.opts.Status(), Workers: list.GetWorkers()}
	for _, q := range s.fleet.Snapshot().Queues {
		out.Queues = append(out.Queues, &pb.QueueDepth{Model: q.Model, Critical: int32(q.Critical), Standard: int32(q.Standard), Batch: int32(q.Batch)})
	}
	return out, nil
}
