package extproc

import (
	"context"
	"slices"
	"testing"

	"github.com/llm-router/llm-router/scheduler"
)

// pdScheduler hands out claims of disaggregated requests: decode on its
// worker, prefill on prefill ("" aggregated).
type pdScheduler struct {
	*fakeScheduler
	prefill string
}

type pdClaim struct {
	*fakeClaim
	prefill string
	over    *[]bool // PrefillOver's calls
}

func (c pdClaim) Prefill() (string, bool) { return c.prefill, c.prefill != "" }

func (c pdClaim) PrefillOver(failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.over = append(*c.over, failed)
}

func (p pdScheduler) Admit(ctx context.Context, req scheduler.Request) (Claim, error) {
	c, err := p.fakeScheduler.Admit(ctx, req)
	if err != nil {
		return nil, err
	}
	return pdClaim{c.(*fakeClaim), p.prefill, new([]bool)}, nil
}

func runCluster(t *testing.T, sched Scheduler) *fakeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := newFakeStream(ctx)
	srv := New(sched, Options{
		ClusterFor: func(w, m string) string { return w + ".via." + m }, MaxBodyBytes: 1 << 20,
		AddressOf: func(w string) (string, bool) { a, ok := addrs[w]; return a, ok },
	})
	go func() {
		_ = srv.Process(st)
		close(st.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-st.done
	})
	return st
}

// In cluster-header mode a disaggregated request is routed to its decode
// worker's cluster with the prefill worker named in x-prefiller-host-port;
// a client's copy is removed in the headers phase whatever the decision.
func TestPrefillerHeaderClusterMode(t *testing.T) {
	for _, tc := range []struct{ prefill, want string }{{"w2", "10.0.0.2:8000"}, {"", ""}} {
		st := runCluster(t, pdScheduler{&fakeScheduler{worker: "w1"}, tc.prefill})
		r := st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions", HeaderPrefiller, "6.6.6.6:1"))
		if !slices.Contains(r.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(), HeaderPrefiller) {
			t.Fatalf("client's %s not removed", HeaderPrefiller)
		}
		r = st.roundTrip(t, reqBody(`{"model":"m","prompt":"hi","max_tokens":7}`))
		set := setHeaders(r.GetRequestBody().GetResponse().GetHeaderMutation())
		if set[headerCluster] != "w1.via.m" || set[HeaderPrefiller] != tc.want {
			t.Fatalf("prefill %q: cluster %q, %s %q, want %q", tc.prefill, set[headerCluster], HeaderPrefiller, set[HeaderPrefiller], tc.want)
		}
	}
}

// In endpoint-picker mode (full duplex) the held headers reply names the
// decode worker as the destination and the prefill worker in
// x-prefiller-host-port, and no longer removes the header it sets; an
// aggregated request's reply removes the client's copy.
func TestPrefillerHeaderEndpointPickerMode(t *testing.T) {
	for _, tc := range []struct{ prefill, want string }{{"w3", "10.0.0.3:8000"}, {"", ""}} {
		st := runEPP(t, pdScheduler{&fakeScheduler{worker: "w1"}, tc.prefill}, 0)
		st.send(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions", HeaderPrefiller, "6.6.6.6:1"))
		st.in <- chunk(`{"model":"m","prompt":"hi","max_tokens":7}`, true)
		mut := st.next(t).GetRequestHeaders().GetResponse().GetHeaderMutation()
		set := setHeaders(mut)
		if set[HeaderDestination] != "10.0.0.1:8000" || set[HeaderPrefiller] != tc.want {
			t.Fatalf("prefill %q: destination %q, %s %q, want %q", tc.prefill, set[HeaderDestination], HeaderPrefiller, set[HeaderPrefiller], tc.want)
		}
		removed := slices.Contains(mut.GetRemoveHeaders(), HeaderPrefiller)
		if removed != (tc.want == "") {
			t.Fatalf("prefill %q: %s removed %v", tc.prefill, HeaderPrefiller, removed)
		}
		st.next(t) // the body
	}
}

// The response's headers end the prefill: the sidecar's fallback is a
// failed prefill, any other answer a finished one.
func TestResponseHeadersEndThePrefill(t *testing.T) {
	for _, tc := range []struct {
		served string
		want   bool
	}{{"fallback", true}, {"disaggregated", false}, {"", false}} {
		sched := &fakeScheduler{worker: "w1"}
		pd := &recordingPD{fakeScheduler: sched}
		st := runCluster(t, pd)
		st.roundTrip(t, reqHeaders(false, ":method", "POST", ":path", "/v1/completions"))
		st.roundTrip(t, reqBody(`{"model":"m","prompt":"hi","max_tokens":7}`))
		kv := []string{":status", "200", "content-type", "application/json", headerUpstream, "w1"}
		if tc.served != "" {
			kv = append(kv, headerPDServed, tc.served)
		}
		st.roundTrip(t, respHeaders(kv...))
		c := pd.claims[0]
		c.mu.Lock()
		got := slices.Clone(*c.over)
		c.mu.Unlock()
		if len(got) != 1 || got[0] != tc.want {
			t.Fatalf("x-pd-served %q: PrefillOver calls %v, want [%v]", tc.served, got, tc.want)
		}
	}
}

// recordingPD keeps the pdClaims it hands out.
type recordingPD struct {
	*fakeScheduler
	claims []pdClaim
}

func (r *recordingPD) Admit(ctx context.Context, req scheduler.Request) (Claim, error) {
	c, err := r.fakeScheduler.Admit(ctx, req)
	if err != nil {
		return nil, err
	}
	pc := pdClaim{c.(*fakeClaim), "w2", new([]bool)}
	r.claims = append(r.claims, pc)
	return pc, nil
}
