package caps

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/llm-router/llm-router/state"
)

var t0 = time.Unix(1_700_000_000, 0)

// feed is a worker whose averages have n samples at ttft seconds and tps
// tokens/s.
func feed(n int64, ttft, tps float64) Observation {
	return Observation{
		TTFT:         state.EMA{Value: ttft, Samples: n},
		TokensPerSec: state.EMA{Value: tps, Samples: n},
	}
}

func obs(cap, inFlight int, n int64, ttft, tps float64) Observation {
	o := feed(n, ttft, tps)
	o.Cap, o.InFlight = cap, inFlight
	return o
}

// step is one case of TestNextSteps: a limit and an observation, and the
// limit expected after them.
type step struct {
	name      string
	p         Params
	l         Limit
	o         Observation
	value     int
	estimate  float64
	gradient  float64
	baseTTFT  float64
	changed   bool
	seenTTFT  int64
	unchanged bool // the limit comes back exactly as it went in
}

func TestNextSteps(t *testing.T) {
	p := Params{}
	calm := Limit{Value: 8, Estimate: 8, Gradient: 1, BaseTTFT: 0.1, BaseITL: 0.01, SeenTTFT: 10, SeenTPS: 10}
	half := Limit{Value: 4, Estimate: 4, Gradient: 1, BaseTTFT: 0.1, BaseITL: 0.01, SeenTTFT: 10, SeenTPS: 10}
	tests := []step{
		{name: "no limit yet starts at the cap", l: Limit{}, o: obs(8, 0, 0, 0, 0), value: 8, estimate: 8, gradient: 1, changed: true},
		{name: "too few new samples: nothing moves", l: calm, o: obs(8, 8, 17, 1, 10), unchanged: true},
		{name: "TTFT at five times its baseline halves the limit", l: calm, o: obs(8, 8, 18, 0.5, 100), value: 4, estimate: 4, gradient: 0.5, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "TTFT at three times its baseline: two thirds", l: calm, o: obs(8, 8, 18, 0.3, 100), value: 5, estimate: 8 * 2 * 0.101 / 0.3, gradient: 2 * 0.101 / 0.3, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "a cut is at most a half", l: calm, o: obs(8, 8, 18, 10, 100), value: 4, estimate: 4, gradient: 0.5, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "ITL past its tolerance cuts too", l: calm, o: obs(8, 8, 18, 0.1, 40), value: 4, estimate: 8 * 1.5 * 0.0101 / 0.025, gradient: 1.5 * 0.0101 / 0.025, baseTTFT: 0.1, changed: true, seenTTFT: 18},
		{name: "within tolerance and busy: grows by its square root", l: half, o: obs(8, 2, 18, 0.19, 100), value: 6, estimate: 6, gradient: 1, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "within tolerance but mostly idle: holds", l: half, o: obs(8, 1, 18, 0.19, 100), value: 4, estimate: 4, gradient: 1, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "growth stops at the cap", l: Limit{Value: 7, Estimate: 7.5, BaseTTFT: 0.1, BaseITL: 0.01, SeenTTFT: 10, SeenTPS: 10}, o: obs(8, 7, 18, 0.1, 100), value: 8, estimate: 8, gradient: 1, baseTTFT: 0.1, changed: true, seenTTFT: 18},
		{name: "a faster run lowers the baseline", l: calm, o: obs(8, 8, 18, 0.05, 100), value: 8, estimate: 8, gradient: 1, baseTTFT: 0.05, changed: true, seenTTFT: 18},
		{name: "the floor holds", l: Limit{Value: 1, Estimate: 1.2, BaseTTFT: 0.1, BaseITL: 0.01, SeenTTFT: 10, SeenTPS: 10}, o: obs(8, 1, 18, 1, 100), value: 1, estimate: 1, gradient: 0.5, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "a higher floor", p: Params{Floor: 3}, l: calm, o: obs(8, 8, 18, 10, 100), value: 4, estimate: 4, gradient: 0.5, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "a floor above the cap stops at the cap", p: Params{Floor: 12}, l: calm, o: obs(8, 8, 18, 10, 100), value: 8, estimate: 8, gradient: 0.5, baseTTFT: 0.101, changed: true, seenTTFT: 18},
		{name: "a cap lowered in the config bounds the limit at once", l: calm, o: obs(3, 0, 12, 0.1, 100), value: 3, estimate: 3, gradient: 1, baseTTFT: 0.1, changed: true, seenTTFT: 10},
		{name: "averages that started again are counted again", l: calm, o: obs(8, 8, 9, 0.5, 100), value: 4, estimate: 4, gradient: 0.5, baseTTFT: 0.101, changed: true, seenTTFT: 9},
	}
	engine := Params{EngineWaiting: 2}
	queued := func(running, waiting float64, at time.Time) Observation {
		o := obs(8, 8, 10, 0.1, 100) // no new latency samples
		o.Running, o.Waiting = state.Sample{Value: running, At: at}, state.Sample{Value: waiting, At: at}
		return o
	}
	tests = append(tests, []step{
		{name: "engine queue: 6 waiting behind 6 running halves the limit", p: engine, l: calm, o: queued(6, 6, t0.Add(-time.Second)), value: 4, estimate: 4, gradient: 0.5, changed: true},
		{name: "engine queue: 3 waiting behind 7 running cuts to seven tenths", p: engine, l: calm, o: queued(7, 3, t0.Add(-time.Second)), value: 5, estimate: 5.6, gradient: 0.7, changed: true},
		{name: "engine queue within its tolerance: nothing moves", p: engine, l: calm, o: queued(7, 2, t0.Add(-time.Second)), unchanged: true},
		{name: "engine queue read before the last update: nothing moves", p: engine, l: func() Limit { c := calm; c.Updated = t0; return c }(), o: queued(6, 6, t0.Add(-time.Second)), unchanged: true},
		{name: "engine queue signal off: nothing moves", l: calm, o: queued(6, 6, t0.Add(-time.Second)), unchanged: true},
		{name: "engine not reporting: nothing moves", p: engine, l: calm, o: queued(0, 0, time.Time{}), unchanged: true},
	}...)
	tail := Params{SlowGapShare: 0.0005}
	slowGaps := func(inFlight int, share float64, at time.Time) Observation {
		o := obs(8, inFlight, 10, 0.1, 100) // no new latency samples
		o.SlowShare = state.Sample{Value: share, At: at}
		return o
	}
	recent := t0.Add(-time.Second)
	// busyMeans: new, calm TTFT and tokens/s samples on a busy worker whose
	// last window showed share; halfUpdated: a limit updated since it.
	busyMeans := func(share float64) Observation {
		o := slowGaps(4, share, recent)
		o.TTFT.Samples, o.TokensPerSec.Samples = 18, 18
		return o
	}
	halfUpdated := half
	halfUpdated.Updated = t0
	tests = append(tests, []step{
		{name: "slow gaps at twice their budget halve the limit", p: tail, l: calm, o: slowGaps(8, 0.001, recent), value: 4, estimate: 4, gradient: 0.5, changed: true},
		{name: "slow gaps at 1.25 times their budget: four fifths", p: tail, l: calm, o: slowGaps(8, 0.000625, recent), value: 6, estimate: 6.4, gradient: 0.8, changed: true},
		{name: "slow gaps far over budget: at most halved", p: tail, l: calm, o: slowGaps(8, 0.2, recent), value: 4, estimate: 4, gradient: 0.5, changed: true},
		{name: "slow gaps within budget and busy: grows", p: tail, l: half, o: slowGaps(3, 0.0005, recent), value: 6, estimate: 6, gradient: 1, changed: true},
		{name: "no slow gaps but mostly idle: holds", p: tail, l: half, o: slowGaps(1, 0, recent), value: 4, estimate: 4, gradient: 1, changed: true},
		{name: "a window closed before the last update: nothing moves", p: tail, l: func() Limit { c := calm; c.Updated = t0; return c }(), o: slowGaps(8, 0.01, recent), unchanged: true},
		{name: "tail signal off: nothing moves", l: calm, o: slowGaps(8, 0.01, recent), unchanged: true},
		{name: "no window closed yet: nothing moves", p: tail, l: calm, o: slowGaps(8, 0, time.Time{}), unchanged: true},
		{name: "calm means do not grow a limit whose last window was over budget", p: tail, l: halfUpdated, o: busyMeans(0.001), value: 4, estimate: 4, gradient: 1, baseTTFT: 0.1, changed: true, seenTTFT: 18},
		{name: "calm means grow a limit whose last window was within budget", p: tail, l: halfUpdated, o: busyMeans(0.0004), value: 6, estimate: 6, gradient: 1, baseTTFT: 0.1, changed: true, seenTTFT: 18},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			if tc.p != (Params{}) {
				q = tc.p
			}
			got, changed := q.Next(tc.l, tc.o, t0)
			if tc.unchanged {
				if changed || got != tc.l {
					t.Fatalf("got %+v (changed %v), want it unchanged", got, changed)
				}
				return
			}
			if changed != tc.changed || got.Value != tc.value || !near(got.Estimate, tc.estimate) || !near(got.Gradient, tc.gradient) {
				t.Fatalf("got value %d estimate %.4f gradient %.4f changed %v, want %d %.4f %.4f %v (%+v)",
					got.Value, got.Estimate, got.Gradient, changed, tc.value, tc.estimate, tc.gradient, tc.changed, got)
			}
			if tc.baseTTFT != 0 && !near(got.BaseTTFT, tc.baseTTFT) {
				t.Fatalf("baseline TTFT %.4f, want %.4f", got.BaseTTFT, tc.baseTTFT)
			}
			if tc.seenTTFT != 0 && got.SeenTTFT != tc.seenTTFT {
				t.Fatalf("seen TTFT samples %d, want %d", got.SeenTTFT, tc.seenTTFT)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestNextConverges runs the limiter against a worker model whose TTFT
// is its service time while it runs at most k requests at once and grows
// with its internal queue beyond: the limit settles near k, far below the
// cap, and climbs back to the cap when the worker speeds up.
func TestNextConverges(t *testing.T) {
	const cap, service = 32, 0.1
	p := Params{}
	k := 4
	ttftAt := func(inFlight int) float64 {
		if inFlight <= k {
			return service
		}
		// Requests beyond k wait their turn: on average half the queue's
		// service ahead of them.
		return service * (1 + float64(inFlight-k)/float64(k))
	}
	var l Limit
	n := int64(0)
	run := func(updates int) {
		for range updates {
			n += 8
			inFlight := max(l.Value, 1)
			if l.Value == 0 {
				inFlight = cap
			}
			l, _ = p.Next(l, obs(cap, inFlight, n, ttftAt(inFlight), 50), t0)
		}
	}
	// The first sample sets a baseline under load; a quiet spell shows
	// the true one.
	run(1)
	l, _ = p.Next(l, obs(cap, 1, n+8, service, 50), t0)
	n += 8
	run(40)
	if l.Value > 3*k || l.Value < 1 {
		t.Fatalf("limit %d after 40 updates, want within [1, %d] for a worker that holds %d", l.Value, 3*k, k)
	}
	k = 64
	run(40)
	if l.Value != cap {
		t.Fatalf("limit %d after the worker sped up, want the cap %d", l.Value, cap)
	}
}

// TestNextTailConverges runs the tail signal alone against a worker whose
// share of slow gaps is nil up to k requests and grows steeply beyond (the
// shape gpusim's A40 shows on the Azure trace: 0 at half its throughput,
// 0.08 % at 60 %, 1.6 % at 70 %): from a cap three times k the limit
// comes down to about k and stays there on average, and climbs back to
// the cap when the worker speeds up.
func TestNextTailConverges(t *testing.T) {
	const cap = 24
	p := Params{SlowGapShare: 0.0005}
	k := 8
	shareAt := func(inFlight int) float64 {
		if inFlight <= k {
			return 0
		}
		return 0.002 * math.Pow(3, float64(inFlight-k-1))
	}
	var l Limit
	at := t0
	run := func(windows int) (mean float64) {
		for range windows {
			inFlight := l.Value
			if inFlight == 0 {
				inFlight = cap
			}
			at = at.Add(time.Second)
			o := Observation{Cap: cap, InFlight: inFlight, SlowShare: state.Sample{Value: shareAt(inFlight), At: at}}
			l, _ = p.Next(l, o, at)
			mean += float64(l.Value) / float64(windows)
		}
		return mean
	}
	run(10)
	mean := run(60)
	t.Logf("mean %.2f", mean)
	if mean < float64(k)/2 || mean > float64(k)+2 {
		t.Fatalf("mean limit %.1f over 60 windows, want about %d (at least %d, at most %d)", mean, k, k/2, k+2)
	}
	k = 64
	run(20)
	if l.Value != cap {
		t.Fatalf("limit %d after the worker sped up, want the cap %d", l.Value, cap)
	}
}

func TestBaselineDrifts(t *testing.T) {
	b := 0.1
	for range 10 {
		b = baseline(b, 0.2, 0.01)
	}
	if want := 0.1 * math.Pow(1.01, 10); !near(b, want) {
		t.Fatalf("baseline %.6f after 10 updates at 0.2, want %.6f", b, want)
	}
	if got := baseline(0.19, 0.2, 0.5); got != 0.2 {
		t.Fatalf("baseline drifted past the recent value: %v", got)
	}
}

type fakeStore struct{ puts []map[string]Limit }

func (f *fakeStore) PutLimits(_ context.Context, ls map[string]state.Limit) error {
	put := map[string]Limit{}
	for id, l := range ls {
		put[id] = FromState(l)
	}
	f.puts = append(f.puts, put)
	return nil
}

func snapOf(ws ...state.Worker) state.Snapshot { return state.Snapshot{Workers: ws} }

func worker(id string, cap int, l Limit, n int64, ttft float64) state.Worker {
	return state.Worker{
		Spec: state.WorkerSpec{ID: id, MaxConcurrency: cap}, InFlight: cap, Limit: l.State(),
		Stats: state.Stats{TTFT: state.EMA{Value: ttft, Samples: n}, TokensPerSec: state.EMA{Value: 50, Samples: n}},
	}
}

func TestLearnerWritesOnlyItsWorkersChanges(t *testing.T) {
	fs := &fakeStore{}
	ln := NewLearner(fs, Params{}, true, func() time.Time { return t0 })
	settled := Limit{Value: 4, Estimate: 4, Gradient: 1, BaseTTFT: 0.1, BaseITL: 0.02, SeenTTFT: 20, SeenTPS: 20}
	snap := snapOf(
		worker("slow", 8, Limit{Value: 8, Estimate: 8, BaseTTFT: 0.1, BaseITL: 0.02, SeenTTFT: 10, SeenTPS: 10}, 18, 0.4),
		worker("settled", 8, settled, 20, 0.1), // no new samples
		worker("theirs", 8, Limit{}, 18, 0.4),
	)
	if err := ln.Learn(context.Background(), snap, []string{"slow", "settled"}); err != nil {
		t.Fatal(err)
	}
	if len(fs.puts) != 1 || len(fs.puts[0]) != 1 {
		t.Fatalf("writes %+v, want one write of one worker", fs.puts)
	}
	if got := fs.puts[0]["slow"]; got.Value != 4 || !got.Updated.Equal(t0) {
		t.Fatalf("slow worker's limit %+v, want 4 updated at t0", got)
	}
	fs.puts = nil
	if err := ln.Learn(context.Background(), snapOf(worker("settled", 8, settled, 20, 0.1)), []string{"settled"}); err != nil {
		t.Fatal(err)
	}
	if len(fs.puts) != 0 {
		t.Fatalf("nothing changed, yet wrote %+v", fs.puts)
	}
}

func TestDisabledLearnerLiftsOldLimits(t *testing.T) {
	fs := &fakeStore{}
	ln := NewLearner(fs, Params{}, false, nil)
	snap := snapOf(
		worker("limited", 8, Limit{Value: 2, Estimate: 2}, 18, 0.4),
		worker("free", 8, Limit{}, 18, 0.4),
	)
	if err := ln.Learn(context.Background(), snap, []string{"limited", "free"}); err != nil {
		t.Fatal(err)
	}
	if len(fs.puts) != 1 || len(fs.puts[0]) != 1 || fs.puts[0]["limited"] != (Limit{}) {
		t.Fatalf("writes %+v, want the old limit lifted and nothing else", fs.puts)
	}
}

// TestLimitRoundTripsThroughTheStoreForm: the store keeps the limiter's
// memory as given, so a limit read back is the limit written; the store's
// numbers win over the memory's copy; a memory that does not decode is
// dropped, not fatal.
func TestLimitRoundTripsThroughTheStoreForm(t *testing.T) {
	l := Limit{Value: 3, Estimate: 3.4, Gradient: 0.6, BaseTTFT: 0.12, BaseITL: 0.02, SeenTTFT: 9, SeenTPS: 8, Updated: t0, Tokens: 5000, TokenEstimate: 5000.5}
	s := l.State()
	if s.Value != 3 || s.Tokens != 5000 || len(s.Limiter) == 0 {
		t.Fatalf("store form %+v", s)
	}
	got := FromState(s)
	if !got.Updated.Equal(l.Updated) {
		t.Fatalf("read back updated %v, want %v", got.Updated, l.Updated)
	}
	if got.Updated = l.Updated; got != l {
		t.Fatalf("read back %+v, want %+v", got, l)
	}
	s.Value = 2
	if got := FromState(s); got.Value != 2 || got.Estimate != 3.4 {
		t.Fatalf("store's value 2 with memory %+v: read %+v", l, got)
	}
	if got := FromState(state.Limit{Value: 1, Limiter: []byte(`"not a limit"`)}); got != (Limit{Value: 1}) {
		t.Fatalf("undecodable memory: read %+v, want only the value", got)
	}
	if !(Limit{}).State().IsZero() {
		t.Fatal("the zero Limit is not the store's zero limit")
	}
}
