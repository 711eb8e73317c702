package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/metrics"
	"github.com/llm-router/llm-router/state"
)

// Learner learns from the monitored workers' state once a cycle (adaptive
// caps: internal/caps). mine are the workers this replica monitors.
type Learner interface {
	Learn(ctx context.Context, snap state.Snapshot, mine []string) error
}

// Workers lists the workers to monitor (the registry, from the snapshot).
type Workers interface {
	Snapshot() state.Snapshot
}

// Options configure a Monitor.
type Options struct {
	Replica        string
	ScrapeInterval time.Duration
	ScrapeTimeout  time.Duration
	HealthInterval time.Duration
	Client         *http.Client
	Logger         *zap.Logger
	Metrics        *metrics.Metrics
	Now            func() time.Time
	// Learner (may be nil) runs after each cycle's scrapes.
	Learner Learner
	// SlowGap is the inter-token SLO whose share of gaps over it the
	// monitor measures for the learner (gaps.go); 0: not measured.
	SlowGap time.Duration
}

// Monitor scrapes and health-checks the workers this replica holds the
// monitor lease of.
type Monitor struct {
	store   state.Monitor
	workers Workers
	opts    Options
	log     *zap.Logger

	mu          sync.Mutex
	lastHealth  map[string]time.Time
	scrapeCount map[string]int64 // per worker, scrapes this replica did
}

// NewMonitor returns a monitor; Run starts it.
func NewMonitor(store state.Monitor, workers Workers, o Options) *Monitor {
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = 500 * time.Millisecond
	}
	if o.ScrapeTimeout <= 0 || o.ScrapeTimeout > o.ScrapeInterval {
		o.ScrapeTimeout = o.ScrapeInterval * 4 / 5
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 5 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Monitor{store: store, workers: workers, opts: o, log: o.Logger, lastHealth: map[string]time.Time{}, scrapeCount: map[string]int64{}}
}

// Run scrapes every ScrapeInterval until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.ScrapeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Cycle(ctx)
		}
	}
}

// Cycle takes the monitor leases and scrapes (and, when due, health-checks)
// the workers this replica holds.
func (m *Monitor) Cycle(ctx context.Context) {
	snap := m.workers.Snapshot()
	specs := map[string]state.WorkerSpec{}
	prev := map[string]state.Worker{}
	ids := make([]string, 0, len(snap.Workers))
	for _, w := range snap.Workers {
		specs[w.Spec.ID] = w.Spec
		prev[w.Spec.ID] = w
		ids = append(ids, w.Spec.ID)
	}
	if len(ids) == 0 {
		return
	}
	// The lease outlives a few missed cycles, so a busy replica keeps its
	// workers and a dead one's are taken over within three intervals.
	mine, err := m.store.AcquireMonitors(ctx, m.opts.Replica, ids, 3*m.opts.ScrapeInterval)
	if err != nil {
		m.log.Warn("take monitor leases", zap.Error(err))
		return
	}
	now := m.opts.Now()
	cctx, cancel := context.WithTimeout(ctx, m.opts.ScrapeTimeout)
	defer cancel()

	var mu sync.Mutex
	results := map[string]state.Telemetry{}
	checks := map[string]bool{}
	var restarted []string
	dcgm := newDCGMCache(m)
	var wg sync.WaitGroup
	for _, id := range mine {
		spec := specs[id]
		wg.Add(1)
		go func() {
			defer wg.Done()
			tm, scraped := m.scrape(cctx, spec, dcgm, prev[id].Telemetry)
			again := scraped && prefixCheck(prev[id], &tm, m.opts.Now())
			var healthOK, checked bool
			if m.dueForHealth(id, now) {
				healthOK, checked = m.check(cctx, spec), true
			}
			mu.Lock()
			defer mu.Unlock()
			if scraped {
				results[id] = tm
			}
			if again {
				restarted = append(restarted, id)
			}
			if checked {
				checks[id] = healthOK
			}
		}()
	}
	wg.Wait()
	if err := m.store.PutTelemetry(ctx, results); err != nil {
		m.log.Warn("store telemetry", zap.Error(err))
	}
	m.forgetRestarted(ctx, restarted)
	if m.opts.Learner != nil {
		if err := m.opts.Learner.Learn(ctx, snap, mine); err != nil {
			m.log.Warn("learn worker limits", zap.Error(err))
		}
	}
	for id, ok := range checks {
		st, err := m.store.ReportHealth(ctx, id, ok)
		if err != nil {
			m.log.Warn("report health", zap.String("worker", id), zap.Error(err))
			continue
		}
		if !ok {
			m.log.Info("health check failed", zap.String("worker", id), zap.String("health", string(st)))
		}
	}
}

func (m *Monitor) dueForHealth(id string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastHealth[id]) < m.opts.HealthInterval {
		return false
	}
	m.lastHealth[id] = now
	return true
}

// Scrapes reports how many scrapes this replica made of each worker.
func (m *Monitor) Scrapes() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.scrapeCount))
	for k, v := range m.scrapeCount {
		out[k] = v
	}
	return out
}

// scrape reads one worker's metrics (and slots, and DCGM) into telemetry.
// It reports false when the worker declares no metrics.
func (m *Monitor) scrape(ctx context.Context, spec state.WorkerSpec, dcgm *dcgmCache, prev state.Telemetry) (state.Telemetry, bool) {
	format := spec.MetricsFormat
	if format == "" {
		format = FormatVLLM
	}
	if format == "none" {
		return state.Telemetry{}, false
	}
	start := m.opts.Now()
	tm := state.Telemetry{At: start, By: m.opts.Replica}
	m.mu.Lock()
	m.scrapeCount[spec.ID]++
	m.mu.Unlock()
	var errs []string
	var lora *AdapterReading
	body, err := m.get(ctx, urlOr(spec.MetricsURL, spec.Address, "/metrics"))
	if err == nil {
		var r Reading
		if m.opts.SlowGap > 0 {
			r, err = ParseMetricsWithGaps(format, body)
		} else {
			r, err = ParseMetrics(format, body)
		}
		at := m.opts.Now()
		if r.KVUsage != nil {
			tm.KVUsage = state.Sample{Value: *r.KVUsage, At: at}
		}
		if r.Waiting != nil {
			tm.Waiting = state.Sample{Value: *r.Waiting, At: at}
		}
		if r.Running != nil {
			tm.Running = state.Sample{Value: *r.Running, At: at}
		}
		if r.PrefixHits != nil {
			tm.PrefixHits = state.Sample{Value: *r.PrefixHits, At: at}
		}
		if r.KVBlocks != nil {
			tm.KVBlocks = state.Sample{Value: *r.KVBlocks, At: at}
		}
		if r.StartTime != nil {
			tm.StartTime = state.Sample{Value: *r.StartTime, At: at}
		}
		lora = r.Adapters
		if r.ITL != nil { // read only with SlowGap set
			if slow, ok := r.ITL.Over(m.opts.SlowGap.Seconds()); ok {
				gapCheck(prev, &tm, r.ITL.Count, slow, at)
			}
		}
	}
	if err != nil {
		errs = append(errs, err.Error())
	}
	if servesAdapters(spec, lora) {
		rep, err := m.adapterReport(ctx, spec, lora, m.opts.Now())
		if err != nil {
			errs = append(errs, err.Error())
		}
		tm.Adapters = rep
	}
	if format == FormatLlamaCpp {
		// llama.cpp removed its KV metric: slot occupancy stands in.
		body, err := m.get(ctx, urlOr("", spec.Address, "/slots"))
		if err == nil {
			var occ float64
			if occ, err = ParseSlots(body); err == nil {
				tm.KVUsage = state.Sample{Value: occ, At: m.opts.Now()}
			}
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if spec.DCGMURL != "" {
		if util, err := dcgm.gpuUtil(ctx, spec.DCGMURL, spec.DCGMGPU); err == nil {
			tm.GPUUtil = state.Sample{Value: util, At: m.opts.Now()}
		} else {
			errs = append(errs, err.Error())
		}
	}
	result := "ok"
	if len(errs) > 0 {
		tm.Error = strings.Join(errs, "; ")
		result = "error"
	}
	m.opts.Metrics.Scrapes.WithLabelValues(spec.ID, result).Inc()
	m.opts.Metrics.ScrapeDuration.WithLabelValues(format).Observe(m.opts.Now().Sub(start).Seconds())
	return tm, true
}

// check is one active health check: 200 from the health endpoint. A
// llama.cpp server loading its model answers 503 "Loading model": not
// ready, a failed check.
func (m *Monitor) check(ctx context.Context, spec state.WorkerSpec) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, urlOr(spec.HealthURL, spec.Address, "/health"), nil)
	if err != nil {
		return false
	}
	resp, err := m.opts.Client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode == http.StatusOK
}

func (m *Monitor) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return body, nil
}

func urlOr(u, address, path string) string {
	if u != "" {
		return u
	}
	return "http://" + address + path
}

// dcgmCache scrapes each DCGM exporter once per cycle: one exporter
// serves every GPU of its node.
type dcgmCache struct {
	m    *Monitor
	mu   sync.Mutex
	body map[string][]byte
	err  map[string]error
}

func newDCGMCache(m *Monitor) *dcgmCache {
	return &dcgmCache{m: m, body: map[string][]byte{}, err: map[string]error{}}
}

func (c *dcgmCache) gpuUtil(ctx context.Context, url, gpu string) (float64, error) {
	c.mu.Lock()
	body, seen := c.body[url]
	err := c.err[url]
	if !seen && err == nil {
		body, err = c.m.get(ctx, url)
		c.body[url], c.err[url] = body, err
	}
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return ParseDCGM(body, gpu)
}
