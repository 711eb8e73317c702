package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// outcome is one request's fate.
type outcome struct {
	start, end time.Time
	model      string
	stream     bool
	status     int
	err        string
	node       string // x-routed-node: the router's (or fail-open's) record of the worker
	served     string // x-gpusim-id: the worker that really answered
	failOpen   bool
	leaked     bool // an internal header (x-llm-upstream, x-llm-upstream-host) reached the client
	cut        bool // a stream that ended without [DONE]
	lost       bool // no answer within the client timeout
}

func (o outcome) ok() bool { return o.err == "" && o.status == 200 && !o.cut && !o.lost }

// load is a steady stream of requests from a few clients.
type load struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	out  []outcome
}

// startLoad sends requests from conc clients until stopped: 3 in 4 for
// model-a, every third streamed, each client pausing gap between requests.
func startLoad(ctx context.Context, url string, conc int, gap time.Duration) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{stop: cancel}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	for c := 0; c < conc; c++ {
		l.wg.Add(1)
		go func(c int) {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				model := "model-a"
				if (c+i)%4 == 3 {
					model = "model-b"
				}
				o := send(ctx, client, url, model, (c+i)%3 == 0)
				if ctx.Err() != nil && !o.ok() {
					return // stopped mid-request: not a result
				}
				l.mu.Lock()
				l.out = append(l.out, o)
				l.mu.Unlock()
				time.Sleep(gap) // pacing: each client's think time
			}
		}(c)
	}
	return l
}

func send(ctx context.Context, client *http.Client, url, model string, stream bool) outcome {
	o := outcome{start: time.Now(), model: model, stream: stream}
	defer func() { o.end = time.Now() }()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello"}],"max_tokens":16,"stream":%v}`, model, stream)
	req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		o.err = err.Error()
		o.lost = strings.Contains(o.err, "Client.Timeout")
		o.end = time.Now()
		return o
	}
	defer resp.Body.Close()
	o.status, o.node, o.served = resp.StatusCode, resp.Header.Get("x-routed-node"), resp.Header.Get("x-gpusim-id")
	o.failOpen = resp.Header.Get("x-llm-fail-open") == "true"
	o.leaked = resp.Header.Get("x-llm-upstream") != "" || resp.Header.Get("x-llm-upstream-host") != ""
	if stream && resp.StatusCode == 200 {
		done := false
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "data: [DONE]" {
				done = true
			}
		}
		o.cut = !done
		if err := sc.Err(); err != nil {
			o.err = "stream: " + err.Error()
			o.lost = strings.Contains(o.err, "Client.Timeout")
		}
	} else if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		o.err = "body: " + err.Error()
	}
	o.end = time.Now()
	return o
}

// finish stops the load and returns what happened.
func (l *load) finish() []outcome {
	l.stop()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out
}

// snapshot returns the outcomes so far.
func (l *load) snapshot() []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.out...)
}

// probe is a long stream through Envoy that landed on a chosen worker.
type probe struct {
	resp   *http.Response
	cancel context.CancelFunc
}

// openProbes opens up to tries long streams of model-a through Envoy and
// keeps those the router sent to worker (it reads x-routed-node from the
// response headers, long before the stream ends). The others stay open
// until then, so that their load steers the router to worker; then they
// are closed. It fails when none landed there.
func openProbes(ctx context.Context, url, worker string, tries int) ([]*probe, error) {
	var kept, others []*probe
	defer func() {
		for _, p := range others {
			_ = p.resp.Body.Close()
			p.cancel()
		}
	}()
	for i := 0; i < tries && len(kept) < 2; i++ {
		pctx, cancel := context.WithCancel(ctx)
		body := `{"model":"model-a","messages":[{"role":"user","content":"a long one"}],"max_tokens":4000,"stream":true}`
		req, _ := http.NewRequestWithContext(pctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by finish or by the deferred cleanup
		if err != nil {
			cancel()
			return nil, fmt.Errorf("probe stream: %w", err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("x-routed-node") != worker {
			others = append(others, &probe{resp: resp, cancel: cancel})
			continue
		}
		kept = append(kept, &probe{resp: resp, cancel: cancel})
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("no probe stream of %d landed on %s", tries, worker)
	}
	return kept, nil
}

// finish reads the stream to its end and returns the error the client
// saw, "" when there was none (it ended, cleanly or not, without one).
func (p *probe) finish() string {
	defer p.cancel()
	defer p.resp.Body.Close()
	if _, err := io.Copy(io.Discard, p.resp.Body); err != nil {
		return err.Error()
	}
	return ""
}
