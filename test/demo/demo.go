// Package demo runs the quick-start stack: three simulated GPUs, the router
// and a real Envoy, sends a few requests through Envoy and prints which
// worker served each one and why, then serves until interrupted.
//
// The demo is a harness, not product: it runs the router against simulated
// GPUs in a throwaway directory to show it working, and nothing the router
// binary links depends on it. So it lives with the other harnesses and
// starts its processes with test/stack, as the end-to-end tests, the chaos
// suite and the benchmark do; cmd/llm-demo, like cmd/llm-chaos, is a
// harness command.
package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/llm-router/llm-router/test/stack"
)

// Options configure the demo.
type Options struct {
	BinDir string // holds llm-router and gpusim
	Stdout io.Writer
}

type ports struct {
	envoy, envoyAdmin, extproc, admin string
	workers                           [3]string
}

// Run starts the stack, demonstrates it and blocks until ctx ends.
func Run(ctx context.Context, o Options) error {
	out := o.Stdout
	dir, err := os.MkdirTemp("", "llm-router-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	envoyBin, err := stack.EnvoyBinary()
	if err != nil {
		return err
	}
	p := pickPorts(out)

	workers := []struct{ id, model, tps, ttft string }{
		{"gpu-0", "llama-3-8b", "60", "40"},
		{"gpu-1", "llama-3-8b", "25", "150"}, // an older, slower card
		{"gpu-2", "mistral-7b", "45", "60"},
	}
	var procs []interface{ Stop(time.Duration) }
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(3 * time.Second)
		}
	}()
	for i, w := range workers {
		g, err := stack.StartGpusim(ctx, filepath.Join(o.BinDir, "gpusim"),
			"--listen", p.workers[i], "--id", w.id, "--model", w.model,
			"--tokens-per-second", w.tps, "--ttft-ms", w.ttft)
		if err != nil {
			return err
		}
		procs = append(procs, g)
		fmt.Fprintf(out, "gpusim %s serving %s on %s (%s tok/s, TTFT %s ms)\n", w.id, w.model, g.Addr, w.tps, w.ttft)
	}

	cfgPath := filepath.Join(dir, "router.yaml")
	if err := os.WriteFile(cfgPath, []byte(routerConfig(p)), 0o600); err != nil {
		return err
	}
	router, err := stack.StartRouter(ctx, filepath.Join(o.BinDir, "llm-router"), cfgPath, p.admin, p.extproc)
	if err != nil {
		return err
	}
	procs = append(procs, router)
	fmt.Fprintf(out, "llm-router: ext_proc on %s, admin on %s (config %s)\n", p.extproc, p.admin, cfgPath)

	envoyYAML, err := renderEnvoy(filepath.Join(o.BinDir, "llm-router"), cfgPath)
	if err != nil {
		return err
	}
	ev, err := stack.StartEnvoy(ctx, envoyBin, dir, envoyYAML, p.envoyAdmin, p.envoy)
	if err != nil {
		return err
	}
	procs = append(procs, ev)
	version, _ := ev.ServerVersion()
	fmt.Fprintf(out, "envoy %s listening on %s\n\n", version, p.envoy)

	if err := sendRequests(ctx, out, "http://"+p.envoy, router); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nThe stack keeps serving until Ctrl-C. Try:\n\n")
	fmt.Fprintf(out, "  curl -s http://%s/v1/chat/completions -H 'content-type: application/json' \\\n"+
		"    -d '{\"model\":\"llama-3-8b\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"max_tokens\":16}'\n\n", p.envoy)
	fmt.Fprintf(out, "  curl -s http://%s/stats      # per-worker in-flight and moving averages\n", p.admin)
	fmt.Fprintf(out, "  curl -s http://%s/metrics    # Prometheus\n", p.admin)
	<-ctx.Done()
	fmt.Fprintln(out, "\nstopping")
	return nil
}

// pickPorts uses the quick start's well-known ports, or free ones when
// they are taken.
func pickPorts(out io.Writer) ports {
	want := []string{"127.0.0.1:8080", "127.0.0.1:9901", "127.0.0.1:9002", "127.0.0.1:9090", "127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"}
	got := make([]string, len(want))
	for i, a := range want {
		ln, err := net.Listen("tcp", a)
		if err == nil {
			_ = ln.Close()
			got[i] = a
			continue
		}
		free, ferr := stack.FreeAddr()
		if ferr != nil {
			free = a
		}
		fmt.Fprintf(out, "port %s is busy; using %s\n", a, free)
		got[i] = free
	}
	return ports{envoy: got[0], envoyAdmin: got[1], extproc: got[2], admin: got[3], workers: [3]string{got[4], got[5], got[6]}}
}

func routerConfig(p ports) string {
	return fmt.Sprintf(`extproc_listen: %s
admin_listen: %s
strategy: scored
envoy:
  listen: %s
  admin: %s
workers:
  - id: gpu-0
    address: %s
    models: [llama-3-8b]
    zone: zone-a
    max_concurrency: 4
  - id: gpu-1
    address: %s
    models: [llama-3-8b]
    zone: zone-a
    max_concurrency: 4
  - id: gpu-2
    address: %s
    models: [mistral-7b]
    zone: zone-b
    max_concurrency: 4
`, p.extproc, p.admin, p.envoy, p.envoyAdmin, p.workers[0], p.workers[1], p.workers[2])
}

func renderEnvoy(routerBin, cfgPath string) ([]byte, error) {
	p, err := stack.Start("envoy-config", routerBin, []string{"envoy-config", "--config", cfgPath}, nil)
	if err != nil {
		return nil, err
	}
	if err := p.Wait(); err != nil {
		return nil, fmt.Errorf("llm-router envoy-config: %w: %s", err, p.Log())
	}
	return []byte(p.Log()), nil
}

type demoRequest struct {
	model     string
	maxTokens int
	stream    bool
}

// sendRequests sends a warm-up round and then a concurrent burst, so the
// breakdowns show moving averages and in-flight counts at work.
func sendRequests(ctx context.Context, out io.Writer, base string, router *stack.Router) error {
	rounds := [][]demoRequest{
		{{"llama-3-8b", 16, true}, {"llama-3-8b", 16, true}, {"llama-3-8b", 16, true}, {"mistral-7b", 16, false}},
		{{"llama-3-8b", 16, false}, {"llama-3-8b", 16, false}, {"llama-3-8b", 64, true}, {"llama-3-8b", 16, false}, {"llama-3-8b", 32, false}},
	}
	n := 0
	for ri, round := range rounds {
		if ri == 0 {
			fmt.Fprintln(out, "Round 1, one at a time (the router learns each worker's speed):")
		} else {
			fmt.Fprintln(out, "\nRound 2, five at once (in-flight counts and averages both count):")
		}
		type result struct {
			id, node string
			status   int
			took     time.Duration
			err      error
		}
		results := make([]result, len(round))
		var wg sync.WaitGroup
		for i, r := range round {
			n++
			id := fmt.Sprintf("demo-%d", n)
			run := func(i int, r demoRequest) {
				start := time.Now()
				status, node, err := send(ctx, base, id, r)
				results[i] = result{id, node, status, time.Since(start), err}
			}
			if ri == 0 {
				run(i, r)
				continue
			}
			wg.Add(1)
			go func(i int, r demoRequest) { defer wg.Done(); run(i, r) }(i, r)
			time.Sleep(10 * time.Millisecond) // keep the arrival order readable
		}
		wg.Wait()
		for i, res := range results {
			r := round[i]
			if res.err != nil {
				return res.err
			}
			fmt.Fprintf(out, "  %s  %-10s max_tokens=%-3d stream=%-5v -> %s  (HTTP %d, %s)\n",
				res.id, r.model, r.maxTokens, r.stream, res.node, res.status, res.took.Round(time.Millisecond))
			printDecision(out, findDecision(router, res.id))
		}
	}
	return nil
}

func send(ctx context.Context, base, id string, r demoRequest) (int, string, error) {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Tell me about GPUs."}],"max_tokens":%d,"stream":%v}`, r.model, r.maxTokens, r.stream)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-request-id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("x-routed-node"), nil
}

type decision struct {
	RequestID  string `json:"request_id"`
	Worker     string `json:"worker"`
	Strategy   string `json:"strategy"`
	Candidates []struct {
		Worker string         `json:"worker"`
		Active int            `json:"active"`
		Total  float64        `json:"total"`
		Terms  map[string]any `json:"terms"`
	} `json:"candidates"`
}

// findDecision reads the router's structured decision line for id.
func findDecision(router *stack.Router, id string) *decision {
	var found *decision
	_ = stack.WaitFor(context.Background(), 2*time.Second, func() error {
		sc := bufio.NewScanner(strings.NewReader(router.Log()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `"msg":"decision"`) || !strings.Contains(line, `"request_id":"`+id+`"`) {
				continue
			}
			var d decision
			if json.Unmarshal([]byte(line), &d) == nil {
				found = &d
				return nil
			}
		}
		return errors.New("no decision yet")
	})
	return found
}

func printDecision(out io.Writer, d *decision) {
	if d == nil {
		fmt.Fprintln(out, "      (decision not found in the router log)")
		return
	}
	sort.Slice(d.Candidates, func(i, j int) bool { return d.Candidates[i].Total < d.Candidates[j].Total })
	for _, c := range d.Candidates {
		mark := " "
		if c.Worker == d.Worker {
			mark = "*"
		}
		var parts []string
		for _, k := range []string{"active", "norm_latency", "norm_job_cost", "norm_throughput", "node_distance"} {
			switch v := c.Terms[k].(type) {
			case float64:
				parts = append(parts, fmt.Sprintf("%s=%.2f", k, v))
			case string:
				parts = append(parts, k+"="+v)
			}
		}
		fmt.Fprintf(out, "      %s %-6s score %7.2f  %s\n", mark, c.Worker, c.Total, strings.Join(parts, " "))
	}
}
