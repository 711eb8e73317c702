package extproc

import "testing"

// With no served report (an ORIGINAL_DST gateway writes none), a 5xx
// counts against a pick named alone, the one address such a gateway reads;
// after a list, where the request went is unknown; a report still moves
// the claim.
func TestEPPUnreportedServedIsThePick(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fallbacks int
		report    string
		status    string
		worker    string
		failure   bool
	}{
		{"no report, 503", 0, "", "503", "w1", true},
		{"no report, 200", 0, "", "200", "w1", false},
		{"no report after a list, 503", 2, "", "503", "w1", false},
		{"reported fallback", 2, "10.0.0.2:8000", "200", "w2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeScheduler{worker: "w1"}
			st := runEPP(t, rankedScheduler{fakeScheduler: fake, fallbacks: []string{"w2", "w3"}}, tc.fallbacks)
			st.send(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions"))
			st.in <- chunk(`{"model":"m","messages":[]}`, true)
			st.next(t) // the held headers reply, with the destination
			st.next(t) // the body
			resp := respHeaders(":status", tc.status, "content-type", "application/json")
			if tc.report != "" {
				resp = withMetadata(resp, NamespaceLB, map[string]any{KeyServed: tc.report})
			}
			st.roundTrip(t, resp)
			c := fake.claims[0]
			if c.Worker() != tc.worker || len(c.finishes) != 1 || c.finishes[0].UpstreamFailure != tc.failure {
				t.Fatalf("claim on %s, finishes %+v; want %s, upstream failure %v", c.Worker(), c.finishes, tc.worker, tc.failure)
			}
		})
	}
}
