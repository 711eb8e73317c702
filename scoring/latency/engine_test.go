package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// gpuClass is the timing of a simulated GPU, shaped as gpusim's calibrated
// engine: a step costs the host's 3 ms plus 40 µs a sequence, the linear
// layers' time for its tokens (profiled step times, vidur, flat then
// linear) and the time to read its sequences' KV from HBM.
type gpuClass struct {
	name   string
	linear [][2]float64 // (tokens, ms), increasing
	kvNs   float64      // ns to read one context token's KV
	// rate is the arrival rate (requests/s) that loads it moderately.
	rate float64
}

var (
	h100 = gpuClass{"h100", [][2]float64{{1, 5.6}, {64, 5.9}, {128, 6.4}, {256, 9.2}, {512, 12.0}, {1024, 21.1}}, 156, 7}
	a100 = gpuClass{"a100", [][2]float64{{1, 9.7}, {64, 11.2}, {128, 13.2}, {256, 19.5}, {512, 34.7}, {1024, 75.2}}, 65.5, 3.5}
	a40  = gpuClass{"a40", [][2]float64{{1, 23.9}, {64, 30.1}, {128, 30.3}, {256, 44.6}, {512, 71.1}, {1024, 136.9}}, 749, 1.2}
)

func (g gpuClass) linearMs(tokens int) float64 {
	p := g.linear
	x := float64(tokens)
	if x <= p[0][0] {
		return p[0][1]
	}
	i := 1
	for i < len(p)-1 && x > p[i][0] {
		i++
	}
	return p[i-1][1] + (p[i][1]-p[i-1][1])*(x-p[i-1][0])/(p[i][0]-p[i-1][0])
}

// simEngine is a tiny continuous-batching engine with chunked prefill, in
// virtual time: each step decodes one token of every running sequence
// that has finished its prefill and spends the rest of the token budget on
// prefill, the running sequences' first, then new ones, FIFO.
type simEngine struct {
	class   gpuClass
	slow    float64 // multiplies every step: 2 is half speed
	budget  int
	maxSeqs int
	noise   float64 // relative spread of a step's time
	rng     *rand.Rand
	// prefillUntilEnd: the router's view counts a request's prefill
	// tokens until it ends, not until its first token.
	prefillUntilEnd bool
	// aheadInFull: the router's view counts a request's prefill in full
	// until its first token, as the router does (it cannot see how much
	// the engine has computed), instead of what is left of it.
	aheadInFull bool
	// boundMaxTokens: clients send max_tokens as a bound, not the output
	// they get: half send none (the router's default, 256), half 4,096.
	boundMaxTokens bool

	now      float64 // seconds since start
	t0       time.Time
	waiting  []*simReq
	running  []*simReq
	inflight []*simReq
	step     []stepItem
}

type stepItem struct {
	r *simReq
	n int // tokens of r in the step
}

type simReq struct {
	f                    Features
	prompt, uncached     int
	output               int
	prefilled, generated int
	arrival, first       float64
}

func newSimEngine(class gpuClass, seed uint64, t0 time.Time) *simEngine {
	return &simEngine{
		class: class, slow: 1, budget: 512, maxSeqs: 256, noise: 0.05,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), t0: t0,
	}
}

// at is the engine's virtual time as a time.Time.
func (e *simEngine) at(sec float64) time.Time {
	return e.t0.Add(time.Duration(sec * float64(time.Second)))
}

// request draws a request: prompts of 200-2,500 tokens, a third of them
// mostly cached, outputs of 20-400 tokens.
func (e *simEngine) request() (prompt, uncached, output int) {
	prompt = 200 + e.rng.IntN(2300)
	uncached = prompt
	if e.rng.IntN(3) == 0 {
		uncached = max(1, int(float64(prompt)*(0.1+0.4*e.rng.Float64())))
	}
	return prompt, uncached, 20 + e.rng.IntN(380)
}

// features is the router's view of the engine when a request arrives:
// the in-flight requests, their prefill not yet done (as far as the router
// knows: until their first token), their output.
func (e *simEngine) features(uncached, output int) Features {
	f := Features{Running: len(e.inflight), Uncached: uncached, Output: output}
	for _, r := range e.inflight {
		switch {
		case e.prefillUntilEnd:
			f.PrefillTokens += r.uncached
		case e.aheadInFull && r.prefilled < r.uncached:
			f.PrefillTokens += r.uncached
		default:
			f.PrefillTokens += r.uncached - r.prefilled
		}
		f.DecodeTokens += e.maxTokens(r)
	}
	return f
}

// maxTokens is the max_tokens the router sees for r.
func (e *simEngine) maxTokens(r *simReq) int {
	if !e.boundMaxTokens {
		return r.output
	}
	if r.prompt%2 == 0 {
		return 256
	}
	return 4096
}

// run advances the engine to until (seconds), with Poisson arrivals at
// rate(t) per second (at most maxRate), reporting every measured TTFT and
// TPOT to observe. It returns the time reached.
func (e *simEngine) run(until, maxRate float64, rate func(t float64) float64, observe func(Observation)) {
	next := e.now + e.rng.ExpFloat64()/maxRate
	arrive := func(limit float64) {
		for next <= limit {
			if e.rng.Float64()*maxRate < rate(next) {
				p, u, o := e.request()
				r := &simReq{prompt: p, uncached: u, output: o, arrival: next}
				r.f = e.features(u, e.maxTokens(r))
				e.waiting = append(e.waiting, r)
				e.inflight = append(e.inflight, r)
			}
			next += e.rng.ExpFloat64() / maxRate
		}
	}
	for e.now < until {
		if len(e.waiting) == 0 && len(e.running) == 0 {
			e.now = min(next, until)
			arrive(e.now)
			continue
		}
		step := e.step[:0]
		budget := e.budget
		for _, r := range e.running {
			if budget == 0 {
				break
			}
			n := 1
			if r.prefilled < r.uncached {
				n = min(r.uncached-r.prefilled, budget)
			}
			step = append(step, stepItem{r, n})
			budget -= n
		}
		for budget > 0 && len(e.waiting) > 0 && len(e.running) < e.maxSeqs {
			r := e.waiting[0]
			e.waiting = e.waiting[1:]
			e.running = append(e.running, r)
			n := min(r.uncached, budget)
			step = append(step, stepItem{r, n})
			budget -= n
		}
		tokens, ctx := 0, 0
		for _, it := range step {
			tokens += it.n
			ctx += it.r.prompt - it.r.uncached + it.r.prefilled + it.r.generated + it.n
		}
		ms := 3 + 0.04*float64(len(step)) + e.class.linearMs(tokens) + e.class.kvNs*float64(ctx)*1e-6
		ms *= e.slow * math.Exp(e.noise*e.rng.NormFloat64())
		end := e.now + ms/1000
		arrive(end)
		e.now = end
		e.step = step
		for _, it := range step {
			r := it.r
			if r.prefilled < r.uncached {
				r.prefilled += it.n
				if r.prefilled < r.uncached {
					continue
				}
				r.first, r.generated = end, 1
				observe(Observation{At: e.at(end), Features: r.f, TTFT: e.at(end).Sub(e.at(r.arrival))})
			} else {
				r.generated++
			}
			if r.generated >= r.output {
				e.finish(r)
				if r.output > 1 {
					tpot := (end - r.first) / float64(r.output-1)
					observe(Observation{At: e.at(end), Features: r.f, TPOT: time.Duration(tpot * float64(time.Second))})
				}
			}
		}
	}
}

func (e *simEngine) finish(r *simReq) {
	e.running = slices.DeleteFunc(e.running, func(o *simReq) bool { return o == r })
	e.inflight = slices.DeleteFunc(e.inflight, func(o *simReq) bool { return o == r })
}
