package caps

import "testing"

func TestNextTokenSteps(t *testing.T) {
	p := Params{TokenLimits: true}
	calm := Limit{Value: 8, Estimate: 8, Gradient: 1, BaseTTFT: 0.1, BaseITL: 0.01, SeenTTFT: 10, SeenTPS: 10}
	held := calm
	held.Value, held.Estimate, held.Tokens, held.TokenEstimate = 4, 4, 4000, 4000
	withTokens := func(o Observation, tokens int) Observation { o.Tokens = tokens; return o }
	for _, tc := range []struct {
		name   string
		p      Params
		l      Limit
		o      Observation
		tokens int64
		value  int
	}{
		{"the first cut starts from what the request limit holds at the mix", p, calm, withTokens(obs(8, 4, 18, 0.5, 100), 4000), 4000, 4},
		{"a cut cuts the token limit by the same gradient", p, held, withTokens(obs(8, 4, 18, 0.5, 100), 4000), 2000, 2},
		{"within tolerance and holding half of it: grows by 1 + 1/√estimate", p, held, withTokens(obs(8, 2, 18, 0.1, 100), 2000), 6000, 6},
		{"within tolerance, holding less than half: holds", p, held, withTokens(obs(8, 2, 18, 0.1, 100), 1999), 4000, 6},
		{"nothing in flight: no start", p, calm, obs(8, 0, 18, 0.5, 100), 0, 4},
		{"token limits off: a limit left is lifted", Params{}, held, withTokens(obs(8, 1, 18, 0.1, 100), 4000), 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := tc.p.Next(tc.l, tc.o, t0)
			if !changed || got.Tokens != tc.tokens || got.Value != tc.value {
				t.Fatalf("got tokens %d value %d (changed %v), want %d and %d (%+v)", got.Tokens, got.Value, changed, tc.tokens, tc.value, got)
			}
		})
	}
}

// TestNextTokensFollowTheMix runs the limiter against a worker whose TTFT
// is its service time while it holds at most k tokens and grows with the
// square of the excess beyond, fed long requests, then short ones, then
// long ones again. Counting requests, the limit the long requests taught
// is forgotten in the short spell (it climbs back to the cap, rightly:
// the cap's worth of short requests fits), and the next long spell swamps
// the worker until the cuts catch up. Counting tokens too, the token limit
// kept through the short spell holds the long ones near k from their
// first update: the worst TTFT of the second long spell is no worse than
// the limiter's own probing shows in the first.
func TestNextTokensFollowTheMix(t *testing.T) {
	const cap, k, service = 50, 20_000, 0.1
	ttftAt := func(tokens int) float64 {
		if tokens <= k {
			return service
		}
		x := float64(tokens) / k
		return service * x * x
	}
	// run returns the worst TTFT of the last 20 updates of the first long
	// spell (the limiter probing) and of the second long spell.
	run := func(p Params) (probing, second float64, l Limit) {
		n := int64(0)
		update := func(size int) float64 {
			inFlight := cap
			if l.Value > 0 {
				inFlight = l.Value
			}
			if l.Tokens > 0 {
				inFlight = max(1, min(inFlight, int(l.Tokens)/size))
			}
			n += 8
			ttft := ttftAt(inFlight * size)
			o := obs(cap, inFlight, n, ttft, 100)
			o.Tokens = inFlight * size
			l, _ = p.Next(l, o, t0)
			return ttft
		}
		// The first sample sets a baseline under load; a quiet spell
		// shows the true one.
		update(2000)
		n += 8
		l, _ = p.Next(l, obs(cap, 1, n, service, 100), t0)
		for i := range 60 {
			if ttft := update(2000); i >= 40 {
				probing = max(probing, ttft)
			}
		}
		for range 40 {
			update(200)
		}
		if l.Value != cap {
			t.Fatalf("%+v: limit %d after the short spell, want the cap %d", p, l.Value, cap)
		}
		for range 20 {
			second = max(second, update(2000))
		}
		return probing, second, l
	}
	_, requests, _ := run(Params{})
	probing, tokens, l := run(Params{TokenLimits: true})
	t.Logf("worst TTFT of the second long spell: %.2f s counting requests, %.2f s counting tokens (probing %.2f s; token limit %d)", requests, tokens, probing, l.Tokens)
	if tokens > probing || requests < 3*tokens {
		t.Fatalf("worst TTFT of the second long spell %.2f s with token limits (probing %.2f s), %.2f s without: want no worse than probing with, three times that without", tokens, probing, requests)
	}
	if l.Tokens < k/2 || l.Tokens > 2*k {
		t.Fatalf("token limit %d, want about the worker's %d", l.Tokens, k)
	}
}
