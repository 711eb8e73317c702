// Package latency predicts a request's time to first token (TTFT) and time
// per output token (TPOT) on a worker from the load the router sees there,
// and learns each worker's curves from what its requests measure, with no
// per-GPU figures configured. It is pure: no I/O, no clock (every time is
// passed in), no globals.
//
// # The model
//
// Both targets are linear in their parameters, in seconds, over features
// in thousands of tokens (Features; the load is the worker's in flight
// across every router replica, before this request):
//
//	TTFT = a0 + aq·Q + au·U + a2·R + a3·(Q + U)·R
//	TPOT = b0 + b1·R + b2·T
//
// Q is the prefill ahead of the request: the uncached prompt tokens of the
// requests in flight that have not had their first token; U is its own
// uncached prompt. R is the requests in flight on the worker (for TPOT,
// with the request), T the tokens in flight with its prompt and output.
//
// Why these forms. An engine with continuous batching and chunked prefill
// (vLLM V1, SGLang; the simulated GPUs of benchmark/gpusim) runs one
// forward pass after another; a pass costs the host's fixed work (a few
// ms, plus tens of µs a sequence), the linear layers' time for its tokens
// (flat up to 64-128 tokens, then close to linear) and the time to read
// its sequences' KV cache from HBM (proportional to their context). A
// prompt's prefill is spread over passes of the token budget (e.g. 512),
// queued behind the prefill already waiting: the number of passes is
// proportional to Q + U, hence aq and au. They differ because the router
// counts a prompt ahead in full until its first token, while the engine
// has already computed part of it: a token counted ahead costs less than
// one of the request's own. Every running sequence takes one token of
// every pass's budget and adds its host work and KV reads, so each of
// those passes is longer with more sequences: per prefill token the time
// grows with R, hence a3·(Q + U)·R; and the pass under way when the request
// arrives and its last one carry the decodes too, hence a2·R. The decode
// load is counted in sequences, not in their output tokens (max_tokens):
// a sequence costs a pass the same whatever its max_tokens, which clients
// often send as a generous bound or not at all. a0 is the passes a short
// prompt needs at an idle worker. A decoding request gets one token a
// pass, so its TPOT is the pass time: b0 the host's and the weights' fixed
// cost, b1 the per-sequence host work and batch growth, b2 the KV reads of
// the context in flight. Engine metrics (KV usage, waiting, running) are
// not features: they are scraped seconds late, while the router's own
// in-flight counts are exact and live; the KV usage and queue they report
// follow from the same tokens.
//
// # Learning
//
// Each target is fit by weighted least squares over exponentially decayed
// sufficient statistics (XᵀWX, XᵀWy, Σw, Σwy²). An observation made at t
// weighs e^{λ(t−epoch)}, growing with time rather than shrinking, so its
// contribution never changes once computed: statistics are sums, and
// router replicas each add their observations' contributions with atomic
// increments in a shared store, in any order, and fit the same model.
// Fit decays the weights to the time of the fit. When the newest weight
// would pass e^30, the store rebases: every sum is scaled by e^{−λΔ} and
// the epoch moved by Δ, which leaves the model unchanged.
//
// Two timescales pull against each other: the curves (how latency grows
// with load) need minutes of varied load, while a worker that slows down
// must be predicted slower within seconds. So the statistics are kept
// twice. The slow fit (half-life Config.HalfLife, default 3 min) learns
// the curves. The fast fit (Config.FastHalfLife, default 5 s) is
// regularised toward the slow fit scaled by the fast correction, the
// geometric mean of the recent residuals over the slow fit (shrunk toward
// 1 when within noise): a uniform slowdown scales every coefficient at
// once, and where recent traffic concentrates (a queue building up) the
// fast fit reshapes the curve from it. Predictions use the fast fit; with
// little recent traffic it is the slow one. The tests measure both ends:
// a worker whose speed halves is predicted 1.5 times slower within 10 s
// of traffic, where the slow fit alone is not within 20 s, and a lightly
// used worker keeps its curves where the fast fit alone is mostly
// unknown.
//
// # The prior
//
// The fit is ridge regression toward a Prior: each coefficient weighs as
// Prior.Strength observations at a busy worker's typical feature value, so
// the normal equations are always solvable, with no observations the model
// is the prior, and observations all at one load learn the level there
// and keep the prior's slopes. Coefficients are constrained non-negative:
// a prediction never falls as load grows, so adding a request never looks
// like it speeds a worker up. DefaultPrior is a slow GPU (A40 serving
// Llama-2-7B), a generic bound rather than a figure about any worker;
// PriorFrom makes one from the pooled statistics of a model's other
// workers (Config.Add sums them), a better start for a newcomer in a
// fleet of one class. Until a worker has Config.MinSamples effective
// observations (default 8), its predictions are marked Unknown.
//
// # What a store holds
//
// Per worker and model: Version, the Stats epoch and Size float64 sums
// (the layout is documented beside Size), and the Config every replica
// uses (the sums mean nothing under another). A replica fits the model
// (Fit) from what it reads, predicts with it, and when a request
// measures its TTFT or TPOT adds Config.Contribution(model, observation):
// element by element when the store's epoch is the contribution's, else
// rebased (Config.Add). Config.NeedsRebase says when to rebase; a store
// rebases only if the epoch it read is still current, so replicas agree on
// one. Forgetting a worker (it restarted, or left) is deleting its sums.
//
// # Errors
//
// ErrorTracker keeps the absolute relative errors of the last predictions
// of each target and reports their median and 90th percentile, for
// metrics.
package latency
