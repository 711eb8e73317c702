package metrics

import (
	"math"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scheduler"
)

// The fair-queue metrics: per-tenant service and wait, and Jain's
// fairness index of the tenants' recent weighted service.

var labelsTenant = []string{"tenant"}

// maxTenantLabels bounds the tenant label's values: tenants past the
// first this many seen are counted as "other", so that clients naming
// fairness ids cannot grow the series without bound.
const maxTenantLabels = 64

// jainHalfLife is the half-life of the service the fairness index is
// computed over.
const jainHalfLife = 30 * time.Second

// fairTracker keeps each tenant's recent weighted service for the index.
type fairTracker struct {
	mu      sync.Mutex
	weights map[string]float64
	labels  map[string]bool
	service map[string]fairService
}

type fairService struct {
	v  float64
	at time.Time
}

// SetFairWeights sets the tenants' weights (queue.fairness.weights): the
// index compares service over weight.
func (m *Metrics) SetFairWeights(w map[string]float64) {
	m.fair.mu.Lock()
	defer m.fair.mu.Unlock()
	m.fair.weights = w
}

// tenantLabel is tenant, or "other" past maxTenantLabels tenants.
func (f *fairTracker) tenantLabel(tenant string) string {
	if tenant == "" {
		tenant = "default"
	}
	if f.labels == nil {
		f.labels = map[string]bool{}
	}
	if f.labels[tenant] {
		return tenant
	}
	if len(f.labels) >= maxTenantLabels {
		return "other"
	}
	f.labels[tenant] = true
	return tenant
}

// fairFinished records a finished request's service: its prompt and twice
// its completion tokens, as the fair queue counts them.
func (m *Metrics) fairFinished(d *scheduler.Decision, completion int, now time.Time) {
	tokens := float64(max(0, d.PromptTokens) + 2*max(0, completion))
	if tokens <= 0 {
		return
	}
	f := &m.fair
	f.mu.Lock()
	label := f.tenantLabel(d.Tenant)
	w := 1.0
	if x, ok := f.weights[d.Tenant]; ok && x > 0 {
		w = x
	}
	if f.service == nil {
		f.service = map[string]fairService{}
	}
	s := f.service[label]
	s.v = decayed(s.v, now.Sub(s.at)) + tokens/w
	s.at = now
	f.service[label] = s
	j := f.jain(now)
	f.mu.Unlock()
	m.FairServiceTokens.WithLabelValues(label).Add(tokens)
	m.FairnessJainIndex.Set(j)
}

// jain is Jain's index, (Σx)² / (n·Σx²), of the tenants' recent weighted
// service x: 1 when all are served alike, 1/n when one takes everything.
// Tenants whose service decayed below a thousandth of the largest are
// idle and left out.
func (f *fairTracker) jain(now time.Time) float64 {
	xs := make([]float64, 0, len(f.service))
	top := 0.0
	for t, s := range f.service {
		v := decayed(s.v, now.Sub(s.at))
		if v < 1e-9 {
			delete(f.service, t)
			continue
		}
		xs = append(xs, v)
		top = max(top, v)
	}
	var sum, sq float64
	n := 0
	for _, x := range xs {
		if x >= top/1000 {
			sum, sq, n = sum+x, sq+x*x, n+1
		}
	}
	if n == 0 {
		return 1
	}
	return sum * sum / (float64(n) * sq)
}

func decayed(v float64, age time.Duration) float64 {
	if age <= 0 {
		return v
	}
	return v * math.Pow(0.5, age.Seconds()/jainHalfLife.Seconds())
}

// fairWait records a claimed request's wait under its tenant.
func (m *Metrics) fairWait(d *scheduler.Decision) {
	m.fair.mu.Lock()
	label := m.fair.tenantLabel(d.Tenant)
	m.fair.mu.Unlock()
	m.FairWait.WithLabelValues(label).Observe(d.WaitSeconds)
}

// FairnessIDIgnored counts a fairness id header the request's key does not
// allow.
func (m *Metrics) FairnessIDIgnored() { m.FairnessIDsIgnored.Inc() }
