package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeGateway streams max_tokens SSE tokens, one every gap, and names a
// worker per request in x-routed-node.
func fakeGateway(t *testing.T, gap time.Duration) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			MaxTokens int  `json:"max_tokens"`
			Stream    bool `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("x-routed-node", "w"+strconv.FormatInt(n.Add(1)%3, 10))
		if !body.Stream {
			fmt.Fprint(w, `{"choices":[{"message":{"content":"x"}}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 0; i < body.MaxTokens; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			fl.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRunOpenSchedule(t *testing.T) {
	srv := fakeGateway(t, time.Millisecond)
	c := NewClient(srv.URL, 16, "")
	defer c.Close()
	jobs := []Job{{At: 0, Prompt: 5, Output: 3}, {At: 20 * time.Millisecond, Prompt: 5, Output: 4}, {At: 40 * time.Millisecond, Prompt: 5, Output: 5}}
	rs, lag := RunOpen(context.Background(), c, jobs, OpenOptions{Scale: 2, Grace: 5 * time.Second}, nil)
	for i, r := range rs {
		if !r.OK() || r.Tokens != jobs[i].Output || r.Cut || r.Node == "" {
			t.Fatalf("result %d: %+v", i, r)
		}
		// Sent at twice the job's time (the slowdown).
		if want := 2 * jobs[i].At; r.Start < want || r.Start > want+15*time.Millisecond {
			t.Errorf("job %d sent at %v, want %v", i, r.Start, want)
		}
		if r.TTFT <= 0 || len(r.ITLs) != r.Tokens-1 {
			t.Errorf("job %d: ttft %v, %d gaps", i, r.TTFT, len(r.ITLs))
		}
	}
	if lag > 15*time.Millisecond {
		t.Errorf("sender lag %v", lag)
	}
}

func TestRunOpenCutsWhatIsNotMeasured(t *testing.T) {
	srv := fakeGateway(t, 5*time.Millisecond)
	c := NewClient(srv.URL, 16, "")
	defer c.Close()
	jobs := []Job{{Output: 2}, {Output: 2}, {Output: 2000}} // the last would stream for 10 s
	start := time.Now()
	rs, _ := RunOpen(context.Background(), c, jobs, OpenOptions{From: 0, To: 2, Grace: time.Minute}, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v: waited for an unmeasured job", took)
	}
	if !rs[0].OK() || !rs[1].OK() || !rs[2].Cut || rs[2].Tokens == 0 {
		t.Errorf("results %+v", rs)
	}
}

func TestRunOpenFirstTokenOnlyAndGrace(t *testing.T) {
	srv := fakeGateway(t, 5*time.Millisecond)
	c := NewClient(srv.URL, 16, "")
	defer c.Close()
	jobs := []Job{{Output: 1000}, {Output: 1000}}
	start := time.Now()
	rs, _ := RunOpen(context.Background(), c, jobs, OpenOptions{FirstTokenOnly: true, Grace: time.Minute}, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("first-token run took %v", took)
	}
	for _, r := range rs {
		if !r.Cut || r.TTFT <= 0 || r.Tokens == 0 {
			t.Errorf("%+v: want cut after a first token", r)
		}
	}
	start = time.Now()
	rs, _ = RunOpen(context.Background(), c, jobs[:1], OpenOptions{Grace: 100 * time.Millisecond}, nil)
	if took := time.Since(start); took > 2*time.Second || !rs[0].Cut {
		t.Errorf("grace: took %v, result %+v", took, rs[0])
	}
}

func TestSizedRequest(t *testing.T) {
	for _, n := range []int{1 << 10, 256 << 10} {
		r := SizedRequest(n, 8)
		if d := len(r.Body) - n; d < -5 || d > 5 {
			t.Errorf("body of %d bytes for %d", len(r.Body), n)
		}
		var v map[string]any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			t.Errorf("body is not JSON: %v", err)
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine("run", 15, 30, 3*time.Second)
	if !strings.Contains(got, "[###############...............] 15/30 3s") {
		t.Errorf("%q", got)
	}
	if !strings.Contains(progressLine("x", 40, 30, 0), "40/30") {
		t.Error("overflow")
	}
	var p *Progress // a nil bar is a no-op
	p.Add(1)
	p.Finish()
}
