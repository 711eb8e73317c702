// Package app wires one router process together: config, store, scheduler,
// the ext_proc gRPC server and the admin HTTP server, with a graceful
// shutdown.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/envoy/xds"
	"github.com/llm-router/llm-router/extproc"
	"github.com/llm-router/llm-router/internal/admin"
	"github.com/llm-router/llm-router/internal/auth"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/decisions"
	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/internal/telemetry"
	"github.com/llm-router/llm-router/internal/tracing"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
	"github.com/llm-router/llm-router/state"
)

// Router is a running router process: it wires the parts together and
// runs them. The parts do the work: the scheduler decides, the explainer
// explains, replicaStatus reports, the xDS server follows the registry.
type Router struct {
	cfg       config.Config
	log       *zap.Logger
	metrics   *metrics.Metrics
	backend   backend
	sched     *scheduler.Scheduler
	extproc   *extproc.Server
	grpc      *grpc.Server
	health    *health.Server
	admin     *http.Server
	status    *replicaStatus
	ready     chan struct{}
	api       *admin.Service
	adminGRPC *grpc.Server
	xds       *xds.Server // nil with static discovery
	decisions *decisions.Ring
	monitor   *telemetry.Monitor
	certs     *certSource       // nil without TLS
	discovery *discoveryRun     // nil without discovery
	tracing   *tracing.Provider // nil with tracing off
}

// Metrics exposes the router's metrics.
func (r *Router) Metrics() *metrics.Metrics { return r.metrics }

// Monitor exposes the telemetry monitor (tests count its scrapes).
func (r *Router) Monitor() *telemetry.Monitor { return r.monitor }

// Decision returns the decision this replica recorded for a request id.
func (r *Router) Decision(requestID string) (*scheduler.Decision, bool) {
	return r.decisions.Get(requestID)
}

// NewLogger builds the JSON logger for level.
func NewLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil // every decision line matters
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}

// Option adjusts how New builds a router.
type Option func(*options)

type options struct {
	store state.Store
	kube  kubernetes.Interface
	dyn   dynamic.Interface
}

// WithStore makes the router use store instead of building one from the
// config: several routers in one process sharing one in-memory store behave
// as replicas sharing Redis do (tests of the herd race use it).
func WithStore(s state.Store) Option { return func(o *options) { o.store = s } }

// New builds a router from cfg; Serve starts it.
func New(ctx context.Context, cfg config.Config, log *zap.Logger, opts ...Option) (_ *Router, err error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	tp, err := tracing.New(ctx, cfg.Tracing, cfg.ReplicaID, log.Named("tracing"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tp.Shutdown(context.WithoutCancel(ctx))
		}
	}()
	m := metrics.New()
	m.SetFairWeights(cfg.Queue.Fairness.Weights)
	ring := decisions.NewRing(cfg.DecisionLogSize)
	var recorder scheduler.Recorder = ring
	be := memoryBackend(o.store)
	if o.store == nil {
		if be, err = newBackend(cfg, log.Named("store"), m); err != nil {
			return nil, err
		}
	}
	if be.stream != nil {
		recorder = decisions.Fanout{ring, be.stream}
	}
	store := be.store
	// Merged into the shared registry without clobbering live state; with
	// Redis down this registers locally and restores into Redis later.
	if err := store.Register(ctx, specs(cfg.Workers, cfg.LoRA)); err != nil {
		return nil, fmt.Errorf("register workers: %w", err)
	}
	// The metrics count the scheduler's store round trips (a decorator)
	// and observe its decisions; the scheduler knows no Prometheus.
	sched, err := scheduler.New(m.CountStore(store), scheduler.Options{
		Strategy:               cfg.Strategy,
		Params:                 Params(cfg),
		Zone:                   cfg.Locality.Zone,
		Region:                 cfg.Locality.Region,
		ReplicaID:              cfg.ReplicaID,
		RefreshInterval:        cfg.RefreshInterval.D(),
		Lease:                  cfg.ClaimLease.D(),
		NonAtomicClaim:         !cfg.AtomicClaim,
		LogCandidates:          cfg.DecisionLogCandidates,
		Recorder:               recorder,
		TelemetryStale:         cfg.Telemetry.StaleAfter.D(),
		JoinDelay:              joinDelay(cfg),
		KVBlocks:               cfg.Scoring.KVBlocks,
		MaxAffinityBlocks:      cfg.Scoring.MaxPrefixBlocks,
		ClaimTokens:            cfg.AdaptiveCaps.Enabled && cfg.AdaptiveCaps.TokenLimits,
		PrefillTokensPerSecond: cfg.Scoring.PrefillTokensPerSecond,
		Queue: scheduler.QueueOptions{
			MaxSize:            cfg.Queue.MaxQueueSize,
			CriticalMultiplier: cfg.Queue.CriticalMultiplier,
			BatchShare:         cfg.Queue.BatchShare,
			Timeouts:           cfg.Queue.Timeout.ByRank(),
			Weights:            cfg.Queue.Fairness.Weights,
		},
		EMAAlpha:       cfg.EMAAlpha,
		Logger:         log.Named("scheduler"),
		Observer:       m,
		Tracer:         tp.Tracer(),
		Adapters:       adapterOptions(cfg.LoRA),
		Disaggregation: scheduler.Disaggregation{MinUncached: cfg.Disaggregation.MinUncachedTokens},
	})
	if err != nil {
		return nil, err
	}
	if err := m.CollectScoreTerms(sched); err != nil {
		return nil, fmt.Errorf("register node_score_term: %w", err)
	}
	if err := sched.Refresh(ctx); err != nil {
		return nil, err
	}
	r := &Router{cfg: cfg, log: log, metrics: m, backend: be, sched: sched, ready: make(chan struct{}), decisions: ring, status: &replicaStatus{degraded: be.degraded}, tracing: tp}
	if r.discovery, err = newDiscovery(cfg, store, o, log.Named("discovery")); err != nil {
		return nil, err
	}
	r.monitor = telemetry.NewMonitor(store, sched, telemetry.Options{
		Replica:        cfg.ReplicaID,
		ScrapeInterval: cfg.Telemetry.ScrapeInterval.D(),
		ScrapeTimeout:  cfg.Telemetry.ScrapeTimeout.D(),
		HealthInterval: cfg.Health.CheckInterval.D(),
		Logger:         log.Named("telemetry"),
		Metrics:        m,
		Learner:        newLearner(cfg, store),
		SlowGap:        slowGap(cfg),
	})
	keys, err := auth.New(cfg.Auth)
	if err != nil {
		return nil, err
	}
	switch {
	case keys.Enabled():
		r.status.auth = fmt.Sprintf("enabled (%d keys)", keys.Count())
	case keys.Count() > 0:
		r.status.auth = "disabled (auth.enabled: false)"
		log.Warn("API key auth is switched off by auth.enabled: false; any client may use the router")
	default:
		r.status.auth = "disabled (no API keys configured)"
		log.Warn("API key auth is off: no keys configured (auth.keys, auth.keys_file or AUTH_TOKEN); any client may use the router, at standard priority at most")
	}
	r.extproc = extproc.New(extproc.FromScheduler(sched), extproc.Options{
		MaxBodyBytes:         cfg.MaxBodyBytes,
		Auth:                 keys,
		ForwardAuthorization: cfg.Auth.ForwardAuthorization,
		RequestUsage:         cfg.Telemetry.RequestUsage,
		ClusterFor:           envoy.ClusterFor,
		EndpointPicker:       cfg.Envoy.Mode == config.ModeEndpointPicker,
		Fallbacks:            cfg.Envoy.Fallbacks,
		Objectives:           cfg.Auth.Objectives,
		SLO:                  sloPolicy(cfg.SLO),
		FairnessIDIgnored:    m.FairnessIDIgnored,
		AddressOf:            sched.AddressOf,
		Tracer:               tp.Tracer(),
		Logger:               log.Named("extproc"),
	})
	if cfg.TLS.ExtProc || cfg.TLS.Admin {
		if r.certs, err = newCertSource(cfg.TLS, log.Named("tls")); err != nil {
			return nil, err
		}
	}
	grpcOpts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	if cfg.TLS.ExtProc {
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(r.certs.tlsConfig("h2"))))
	}
	r.grpc = grpc.NewServer(grpcOpts...)
	extprocv3.RegisterExternalProcessorServer(r.grpc, m.CountStreams(r.extproc))
	r.health = health.NewServer()
	healthpb.RegisterHealthServer(r.grpc, r.health)
	var configIDs []string
	for _, w := range cfg.Workers {
		configIDs = append(configIDs, w.ID)
	}
	explainer := decisions.NewExplainer(ring, be.stream)
	r.api = admin.New(store, sched, explainer, admin.Options{
		Replica: cfg.ReplicaID, Token: cfg.Admin.Token, Dynamic: cfg.Envoy.Discovery == "xds",
		ConfigWorkers: configIDs, Status: r.status.Status,
	})
	if cfg.Envoy.Discovery == "xds" {
		r.xds = xds.New(ctx, log.Named("xds"))
		r.xds.Register(r.grpc)
	}
	r.adminGRPC = grpc.NewServer()
	pb.RegisterAdminServiceServer(r.adminGRPC, r.api)
	mux := admin.Handler(sched, r.status, explainer, cfg.ReplicaID, m.Registry)
	if err := r.api.Routes(mux); err != nil {
		return nil, err
	}
	if cfg.Admin.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// One port for the admin API: gRPC (HTTP/2 without TLS, prior
	// knowledge) and HTTP/JSON, told apart by content type.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true)
	r.admin = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
				r.adminGRPC.ServeHTTP(w, req)
				return
			}
			mux.ServeHTTP(w, req)
		}),
		Protocols:         &protocols,
		ReadHeaderTimeout: 5 * time.Second,
	}
	if cfg.TLS.Admin {
		r.admin.TLSConfig = r.certs.tlsConfig("h2", "http/1.1")
	}
	return r, nil
}

// Params converts the config into scoring parameters.
func Params(cfg config.Config) scoring.Params {
	return scoring.Params{
		Weights:      cfg.Scoring.Weights.Scoring(),
		JobCostScale: cfg.Scoring.JobCostScale.D(),
		TTFTSLO:      cfg.Scoring.TTFTSLO.D(),
		MinSamples:   int64(cfg.InferenceAware.MinSamples),
		Staleness:    cfg.InferenceAware.Staleness.D(),
		LoadPenalty:  cfg.InferenceAware.LoadPenalty,
	}
}

func specs(ws []config.Worker, lora config.LoRA) []state.WorkerSpec {
	out := make([]state.WorkerSpec, len(ws))
	for i, w := range ws {
		out[i] = state.WorkerSpec{
			ID: w.ID, Address: w.Address, Models: w.Models, Zone: w.Zone, Region: w.Region, MaxConcurrency: w.MaxConcurrency,
			MetricsFormat: w.MetricsFormat, MetricsURL: w.MetricsURL, HealthURL: w.HealthURL, DCGMURL: w.DCGMURL, DCGMGPU: w.DCGMGPU,
			KVBlocks: w.KVBlocks, PrefillTokensPerSecond: w.PrefillTokensPerSecond, Role: state.Role(w.Role).OrBoth(),
			Adapters: lora.WorkerAdapters(w), MaxLoras: w.MaxLoras,
		}
	}
	return out
}

// Ready is closed once both listeners accept connections.
func (r *Router) Ready() <-chan struct{} { return r.ready }

// Store exposes the store (tests read and change worker state through it).
func (r *Router) Store() state.Store { return r.backend.store }

// Scheduler exposes the scheduler (tests and the demo read decisions).
func (r *Router) Scheduler() *scheduler.Scheduler { return r.sched }

// Serve runs until ctx is cancelled, then shuts down gracefully: the gRPC
// health service and /health turn NOT_SERVING, new requests are refused,
// open ext_proc streams get up to shutdown_grace to finish, then it exits.
func (r *Router) Serve(ctx context.Context) error {
	grpcLn, err := net.Listen("tcp", r.cfg.ExtProcListen)
	if err != nil {
		return fmt.Errorf("extproc_listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", r.cfg.AdminListen)
	if err != nil {
		_ = grpcLn.Close()
		return fmt.Errorf("admin_listen: %w", err)
	}
	// The endpoint-picker protocol's health services besides the standard
	// ones. Every replica is ready at once: the state is shared, so there is
	// no leader to wait for (active-active).
	for _, svc := range []string{"", extprocv3.ExternalProcessor_ServiceDesc.ServiceName, "liveness", "readiness"} {
		r.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}

	bgCtx, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	if r.discovery != nil {
		// Ready only once every ready pod is registered: a replica that
		// started with an empty fleet would answer 503s.
		if err := r.discovery.run(bgCtx); err != nil {
			_ = grpcLn.Close()
			_ = adminLn.Close()
			return err
		}
		if err := r.sched.Refresh(ctx); err != nil {
			r.log.Warn("refresh after discovery", zap.Error(err))
		}
	}
	go r.sched.Run(bgCtx)
	go r.backend.run(bgCtx)
	if r.backend.stream != nil {
		go r.backend.stream.Run(bgCtx, 200*time.Millisecond)
	}
	go r.monitor.Run(bgCtx)
	if r.xds != nil {
		go r.xds.Follow(bgCtx, r.sched, r.cfg, r.cfg.RefreshInterval.D())
	}

	errc := make(chan error, 2)
	go func() { errc <- r.grpc.Serve(grpcLn) }()
	go func() {
		serve := r.admin.Serve
		if r.cfg.TLS.Admin {
			serve = func(ln net.Listener) error { return r.admin.ServeTLS(ln, "", "") }
		}
		if err := serve(adminLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	r.log.Info("llm-router serving",
		zap.String("extproc", grpcLn.Addr().String()), zap.String("admin", adminLn.Addr().String()),
		zap.String("strategy", r.sched.Strategy()), zap.String("replica", r.cfg.ReplicaID),
		zap.Int("workers", len(r.cfg.Workers)), zap.Bool("tracing", r.tracing != nil))
	close(r.ready)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	return r.shutdown()
}

func (r *Router) shutdown() error {
	grace := r.cfg.ShutdownGrace.D()
	r.log.Info("shutting down", zap.Duration("grace", grace), zap.Int("open_claims", r.sched.LiveClaims()))
	r.status.draining.Store(true)
	r.health.Shutdown() // NOT_SERVING: Envoy's health checks move traffic away
	if d := r.cfg.ShutdownDelay.D(); d > 0 {
		// Keep serving while Envoy notices the failing health check, so no
		// request meets a closed listener.
		time.Sleep(d)
	}
	r.extproc.Drain()

	done := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		r.log.Warn("shutdown grace expired; closing open streams", zap.Int("open_claims", r.sched.LiveClaims()))
		r.grpc.Stop()
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.adminGRPC.Stop()
	_ = r.admin.Shutdown(ctx)
	// The last spans, the streams' that just ended, go to the collector.
	if err := r.tracing.Shutdown(ctx); err != nil {
		r.log.Warn("export the last spans", zap.Error(err))
	}
	r.log.Info("stopped")
	return nil
}

// SetHealth records a worker's health in the store and refreshes the
// snapshot, so the change applies to the next decision.
func (r *Router) SetHealth(ctx context.Context, worker string, health scoring.Health) error {
	if err := r.backend.store.SetHealth(ctx, worker, health); err != nil {
		return err
	}
	return r.sched.Refresh(ctx)
}

// joinDelay applies only when Envoy learns of workers over xDS.
func joinDelay(cfg config.Config) time.Duration {
	if cfg.Envoy.Discovery != "xds" {
		return 0
	}
	return cfg.Envoy.XDSJoinDelay.D()
}
