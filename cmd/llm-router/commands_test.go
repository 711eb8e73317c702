package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llm-router/llm-router/internal/admin/admintest"
	"github.com/llm-router/llm-router/internal/cli"
	pb "github.com/llm-router/llm-router/proto/llmrouter/v1"
	"github.com/llm-router/llm-router/state"
	"github.com/llm-router/llm-router/test/stack"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with the commands' output")

const token = "tok-123"

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// runCmd runs the command line as main does and returns its outputs.
func runCmd(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	addr, err := stack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func workerIDs(t *testing.T, f *admintest.Fleet) []string {
	t.Helper()
	var ids []string
	for _, w := range f.Snapshot().Workers {
		ids = append(ids, w.Spec.ID)
	}
	return ids
}

func worker(t *testing.T, f *admintest.Fleet, id string) state.Worker {
	t.Helper()
	for _, w := range f.Snapshot().Workers {
		if w.Spec.ID == id {
			return w
		}
	}
	t.Fatalf("no worker %s in the fleet", id)
	return state.Worker{}
}

// TestOperatorCommands runs each command that talks to the admin API
// against the real admin service over a typical fleet: its flags, good and
// bad, what it prints, and what it changed.
func TestOperatorCommands(t *testing.T) {
	t.Setenv("LLM_ROUTER_ADMIN", "")
	t.Setenv("LLM_ROUTER_ADMIN_TOKEN", "")
	tests := []struct {
		name string
		args []string // {admin} is the server's URL
		// setup changes the fleet before the command runs.
		setup func(f *admintest.Fleet)
		// wantErr is part of the error's message; "" wants none.
		wantErr string
		// wantIs is the kind of error (errors.Is), when it has one.
		wantIs error
		// golden is the file stdout must match.
		golden string
		// wantOut and wantStderr are parts of stdout and stderr.
		wantOut, wantStderr []string
		// check looks at stdout and the fleet after the command.
		check func(t *testing.T, stdout string, f *admintest.Fleet)
	}{
		{name: "workers", args: []string{"workers", "--admin", "{admin}"}, golden: "workers.txt"},
		{name: "workers of a model", args: []string{"workers", "--model", "model-b", "--admin", "{admin}"}, golden: "workers-model-b.txt"},
		{
			name: "workers as JSON", args: []string{"workers", "-o", "json", "--admin", "{admin}"},
			check: func(t *testing.T, out string, _ *admintest.Fleet) {
				var resp pb.ListWorkersResponse
				if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
					t.Fatalf("not the API's JSON: %v\n%s", err, out)
				}
				var ids []string
				for _, w := range resp.GetWorkers() {
					ids = append(ids, w.GetSpec().GetId())
				}
				if !slices.Equal(ids, []string{"a-0", "a-1", "dyn-0"}) {
					t.Fatalf("workers %v", ids)
				}
				if a0 := resp.GetWorkers()[0]; a0.GetLearnedLimit().GetValue() != 6 || a0.GetInFlight() != 3 {
					t.Fatalf("a-0 is not as the fleet holds it: %v", a0)
				}
			},
		},
		{name: "workers, the admin address without a scheme", args: []string{"workers", "--admin", "{addr}"}, golden: "workers.txt"},
		{name: "workers takes no argument", args: []string{"workers", "a-0", "--admin", "{admin}"}, wantErr: "usage: llm-router workers"},
		{name: "workers, an unknown output", args: []string{"workers", "-o", "yaml", "--admin", "{admin}"}, wantErr: `-o "yaml": want table or json`},
		{
			name: "workers, an unknown flag", args: []string{"workers", "--bogus", "--admin", "{admin}"},
			wantErr: "flag provided but not defined: -bogus", wantStderr: []string{"Usage of workers:", "-model"},
		},

		{name: "stats", args: []string{"stats", "--admin", "{admin}"}, golden: "stats.txt"},
		{
			name: "stats as JSON", args: []string{"stats", "--admin", "{admin}", "-o", "json"},
			check: func(t *testing.T, out string, _ *admintest.Fleet) {
				var s pb.Stats
				if err := protojson.Unmarshal([]byte(out), &s); err != nil {
					t.Fatalf("not the API's JSON: %v\n%s", err, out)
				}
				if s.GetReplica() != admintest.Replica || len(s.GetWorkers()) != 3 || s.GetQueues()[0].GetBatch() != 9 {
					t.Fatalf("stats: %v", &s)
				}
			},
		},

		{name: "explain", args: []string{"explain", admintest.RequestID, "--admin", "{admin}"}, golden: "explain.txt"},
		{name: "explain, flags first", args: []string{"explain", "--admin", "{admin}", admintest.RequestID}, golden: "explain.txt"},
		{name: "explain as JSON", args: []string{"explain", admintest.RequestID, "-o", "json", "--admin", "{admin}"}, golden: "explain.json"},
		{name: "explain needs a request id", args: []string{"explain", "--admin", "{admin}"}, wantErr: "usage: llm-router explain REQUEST_ID"},
		{name: "explain takes one request id", args: []string{"explain", "a", "b", "--admin", "{admin}"}, wantErr: "usage: llm-router explain REQUEST_ID"},
		{name: "explain an unknown request", args: []string{"explain", "nope", "--admin", "{admin}"}, wantErr: `no decision recorded for request "nope"`, wantIs: cli.ErrNotFound},
		{name: "explain, an unknown output", args: []string{"explain", "x", "-o", "yaml", "--admin", "{admin}"}, wantErr: `-o "yaml": want table or json`},

		{
			name: "drain", args: []string{"drain", "a-0", "--admin", "{admin}", "--token", token},
			wantOut: []string{"a-0 draining: no new requests, 3 in flight\n"},
			check: func(t *testing.T, _ string, f *admintest.Fleet) {
				if !worker(t, f, "a-0").Draining {
					t.Fatal("a-0 not draining")
				}
			},
		},
		{
			name: "drain as JSON", args: []string{"drain", "a-0", "-o", "json", "--admin", "{admin}", "--token", token},
			check: func(t *testing.T, out string, _ *admintest.Fleet) {
				var w pb.Worker
				if err := protojson.Unmarshal([]byte(out), &w); err != nil || !w.GetDraining() || w.GetSpec().GetId() != "a-0" {
					t.Fatalf("drain -o json: %v\n%s", err, out)
				}
			},
		},
		{
			name: "drain --wait returns once nothing is in flight",
			args: []string{"drain", "a-0", "--wait", "--timeout", "20s", "--admin", "{admin}", "--token", token},
			setup: func(f *admintest.Fleet) {
				f.OnRead = func(f *admintest.Fleet) { // a request ends between two polls
					if w := &f.Workers[0]; w.Draining && w.InFlight > 0 {
						w.InFlight--
					}
				}
			},
			wantOut:    []string{"a-0 draining: no new requests, 0 in flight\n"},
			wantStderr: []string{"a-0: 1 in flight\n"}, // the drain's own answer read 2
		},
		{
			name: "drain --wait gives up after its timeout",
			args: []string{"drain", "a-0", "--wait", "--timeout", "300ms", "--admin", "{admin}", "--token", token},
			// The drain itself took effect: the error is the wait's.
			wantErr:    "timed out after 300ms waiting for a-0 to drain: 3 requests still in flight",
			wantStderr: []string{"a-0: 3 in flight\n"},
		},
		{name: "drain, a bad timeout", args: []string{"drain", "a-0", "--wait", "--timeout", "soon", "--admin", "{admin}"}, wantErr: `invalid value "soon" for flag -timeout`},
		{name: "drain needs a worker", args: []string{"drain", "--admin", "{admin}", "--token", token}, wantErr: "usage: llm-router drain WORKER_ID [--admin URL] [--token T] [--wait] [--timeout 5m]"},
		{name: "drain, an unknown worker", args: []string{"drain", "nope", "--admin", "{admin}", "--token", token}, wantErr: `unknown worker "nope"`, wantIs: cli.ErrNotFound},
		{
			name: "drain without the token", args: []string{"drain", "a-0", "--admin", "{admin}"}, wantErr: "unauthorised: pass the admin token", wantIs: cli.ErrUnauthorised,
			check: func(t *testing.T, _ string, f *admintest.Fleet) {
				if worker(t, f, "a-0").Draining {
					t.Fatal("drained without the token")
				}
			},
		},
		{name: "drain with a wrong token", args: []string{"drain", "a-0", "--admin", "{admin}", "--token", "wrong"}, wantErr: "unauthorised", wantIs: cli.ErrUnauthorised},
		{
			name: "drain, the store down", args: []string{"drain", "a-0", "--admin", "{admin}", "--token", token},
			setup:   func(f *admintest.Fleet) { f.StoreErr = errors.New("redis: connection reset") },
			wantErr: "unavailable: a-0: redis: connection reset",
		},

		{
			name: "undrain", args: []string{"undrain", "a-1", "--admin", "{admin}", "--token", token},
			wantOut: []string{"a-1 undrained: taking requests\n"},
			check: func(t *testing.T, _ string, f *admintest.Fleet) {
				if worker(t, f, "a-1").Draining {
					t.Fatal("a-1 still draining")
				}
			},
		},
		{name: "undrain has no --wait", args: []string{"undrain", "a-1", "--wait", "--admin", "{admin}"}, wantErr: "flag provided but not defined: -wait"},
		{name: "undrain needs a worker", args: []string{"undrain", "--admin", "{admin}"}, wantErr: "usage: llm-router undrain WORKER_ID [--admin URL] [--token T]"},

		{
			name: "register",
			args: []string{
				"register", "--id", "dyn-1", "--address", "10.0.0.10:8000", "--model", "model-a, model-b", "--max-concurrency", "3",
				"--zone", "z2", "--metrics-format", "sglang", "--lease", "3s", "--admin", "{admin}", "--token", token,
			},
			wantOut: []string{"dyn-1 registered (lease 3s, heartbeat every 1s)\n"},
			check: func(t *testing.T, _ string, f *admintest.Fleet) {
				w := worker(t, f, "dyn-1")
				want := state.WorkerSpec{ID: "dyn-1", Address: "10.0.0.10:8000", Models: []string{"model-a", "model-b"}, Zone: "z2", MaxConcurrency: 3, MetricsFormat: "sglang"}
				if !w.Registered || w.Spec.ID != want.ID || w.Spec.Address != want.Address || !slices.Equal(w.Spec.Models, want.Models) ||
					w.Spec.Zone != want.Zone || w.Spec.MaxConcurrency != want.MaxConcurrency || w.Spec.MetricsFormat != want.MetricsFormat {
					t.Fatalf("registered %+v, want %+v", w, want)
				}
			},
		},
		{
			name: "register as JSON",
			args: []string{"register", "--id", "dyn-1", "--address", "10.0.0.10:8000", "--model", "m", "-o", "json", "--admin", "{admin}", "--token", token},
			check: func(t *testing.T, out string, _ *admintest.Fleet) {
				var r pb.RegisterWorkerResponse
				if err := protojson.Unmarshal([]byte(out), &r); err != nil || r.GetWorker().GetSpec().GetId() != "dyn-1" ||
					r.GetHeartbeatInterval().AsDuration() != 10*time.Second/3 {
					t.Fatalf("register -o json: %v\n%s", err, out)
				}
			},
		},
		{name: "register takes flags only", args: []string{"register", "dyn-1", "--admin", "{admin}"}, wantErr: `register takes flags only, not "dyn-1"`},
		{
			name:    "register, an address without a port",
			args:    []string{"register", "--id", "dyn-1", "--address", "10.0.0.10", "--model", "m", "--admin", "{admin}", "--token", token},
			wantErr: `spec.address "10.0.0.10": want host:port`,
		},
		{
			name:    "register, no model",
			args:    []string{"register", "--id", "dyn-1", "--address", "10.0.0.10:8000", "--model", " , ", "--admin", "{admin}", "--token", token},
			wantErr: "spec.models: at least one model is required",
		},
		{
			name:    "register, a worker of the config file",
			args:    []string{"register", "--id", "a-0", "--address", "10.0.0.10:8000", "--model", "m", "--admin", "{admin}", "--token", token},
			wantErr: `worker "a-0" is in the router's config file`,
		},
		{
			name:    "register, a lease out of range",
			args:    []string{"register", "--id", "dyn-1", "--address", "10.0.0.10:8000", "--model", "m", "--lease", "1h", "--admin", "{admin}", "--token", token},
			wantErr: "lease must be between 1s and 5m0s, got 1h0m0s",
		},
		{name: "register, a bad lease", args: []string{"register", "--lease", "ten", "--admin", "{admin}"}, wantErr: `invalid value "ten" for flag -lease`},
		{name: "register, a bad cap", args: []string{"register", "--max-concurrency", "many", "--admin", "{admin}"}, wantErr: `invalid value "many" for flag -max-concurrency`},

		{
			name: "deregister", args: []string{"deregister", "dyn-0", "--admin", "{admin}", "--token", token},
			wantOut: []string{"dyn-0 deregistered\n"},
			check: func(t *testing.T, _ string, f *admintest.Fleet) {
				if ids := workerIDs(t, f); slices.Contains(ids, "dyn-0") {
					t.Fatalf("dyn-0 still in %v", ids)
				}
			},
		},
		{name: "deregister, an unknown worker", args: []string{"deregister", "nope", "--admin", "{admin}", "--token", token}, wantErr: `unknown worker "nope"`, wantIs: cli.ErrNotFound},
		{name: "deregister needs a worker", args: []string{"deregister", "--admin", "{admin}"}, wantErr: "usage: llm-router deregister WORKER_ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := admintest.TypicalFleet()
			if tc.setup != nil {
				tc.setup(f)
			}
			srv := admintest.Serve(t, f, token)
			args := slices.Clone(tc.args)
			for i, a := range args {
				a = strings.ReplaceAll(a, "{admin}", srv.URL)
				args[i] = strings.ReplaceAll(a, "{addr}", srv.Listener.Addr().String())
			}
			stdout, stderr, err := runCmd(t.Context(), args...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("llm-router %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("llm-router %s succeeded, want an error with %q\nstdout: %s", strings.Join(args, " "), tc.wantErr, stdout)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want one with %q", err, tc.wantErr)
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Fatalf("error %q is not %v", err, tc.wantIs)
			}
			if tc.golden != "" {
				golden(t, tc.golden, stdout)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.check != nil {
				tc.check(t, stdout, f)
			}
		})
	}
}

// TestCommandsNameAnUnreachableRouter: every command that talks to the
// admin API fails with what went wrong when nothing listens, when the
// answer is not the API's, or when the router's store fails, and none
// prints a result.
func TestCommandsNameAnUnreachableRouter(t *testing.T) {
	t.Setenv("LLM_ROUTER_ADMIN", "")
	t.Setenv("LLM_ROUTER_ADMIN_TOKEN", "")
	// A server that is not a router: 200 with HTML, over HTTP/1 only.
	notRouter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	t.Cleanup(notRouter.Close)
	// A router whose shared store fails: explain answers 502.
	broken := admintest.TypicalFleet()
	broken.StoreErr = errors.New("READONLY You can't write against a read only replica")
	brokenURL := admintest.Serve(t, broken, token).URL
	dead := "http://" + closedAddr(t)

	commands := [][]string{
		{"workers"},
		{"stats"},
		{"explain", admintest.RequestID},
		{"drain", "a-0"},
		{"drain", "a-0", "--wait"},
		{"undrain", "a-0"},
		{"deregister", "a-0"},
		{"register", "--id", "x", "--address", "10.0.0.1:1", "--model", "m"},
	}
	for _, c := range commands {
		for _, tc := range []struct {
			name, admin, wantErr string
		}{
			{"connection refused", dead, "connection refused: no router admin listening at " + dead},
			// gRPC to an HTTP/1 server fails in the transport; explain's
			// JSON decoder finds HTML.
			{"not a router", notRouter.URL, map[bool]string{true: "decode answer from " + notRouter.URL, false: "unavailable"}[c[0] == "explain"]},
		} {
			t.Run(c[0]+"/"+tc.name, func(t *testing.T) {
				args := append(slices.Clone(c), "--admin", tc.admin, "--token", token)
				stdout, _, err := runCmd(t.Context(), args...)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("llm-router %s: error %v, want one with %q", strings.Join(args, " "), err, tc.wantErr)
				}
				if stdout != "" {
					t.Fatalf("printed a result on failure: %q", stdout)
				}
			})
		}
	}
	t.Run("explain/store error", func(t *testing.T) {
		_, _, err := runCmd(t.Context(), "explain", admintest.RequestID, "--admin", brokenURL)
		want := "GET /decisions/" + admintest.RequestID + ": 502 Bad Gateway: READONLY You can't write against a read only replica"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
}

// TestRegisterKeepAliveDeregistersOnExit: an agent (register --keep-alive)
// heartbeats its worker and takes it out of the fleet when it is stopped.
func TestRegisterKeepAliveDeregistersOnExit(t *testing.T) {
	t.Setenv("LLM_ROUTER_ADMIN_TOKEN", "")
	f := admintest.TypicalFleet()
	srv := admintest.Serve(t, f, token)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		stdout string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		out, _, err := runCmd(ctx, "register", "--id", "dyn-1", "--address", "10.0.0.10:8000", "--model", "m",
			"--lease", "1500ms", "--keep-alive", "--admin", srv.URL, "--token", token)
		done <- result{out, err}
	}()
	var first time.Time
	if err := stack.WaitFor(ctx, 10*time.Second, func() error {
		if !slices.Contains(workerIDs(t, f), "dyn-1") {
			return errors.New("dyn-1 not registered")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first = worker(t, f, "dyn-1").LeaseExpires
	// A heartbeat (every lease/3 = 500ms) moves the lease on.
	if err := stack.WaitFor(ctx, 5*time.Second, func() error {
		if !worker(t, f, "dyn-1").LeaseExpires.After(first) {
			return errors.New("no heartbeat yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("register --keep-alive did not return after its context ended")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(r.stdout, "dyn-1 registered") || !strings.HasSuffix(r.stdout, "dyn-1 deregistered\n") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if slices.Contains(workerIDs(t, f), "dyn-1") {
		t.Fatal("dyn-1 still in the fleet after the agent stopped")
	}
}

// TestDispatch: the command word picks the command; no word or an unknown
// one prints the usage and fails.
func TestDispatch(t *testing.T) {
	tests := []struct {
		name            string
		args            []string
		wantErr         string
		wantOut, wantSE string
	}{
		{"no command", nil, "no command given", "", "usage: llm-router <command>"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`, "", "usage: llm-router <command>"},
		{"help", []string{"help"}, "", "usage: llm-router <command>", ""},
		{"--help", []string{"--help"}, "", "explain REQUEST_ID", ""},
		{"version", []string{"version"}, "", "llm-router (Envoy ", ""},
		{"serve needs a config", []string{"serve"}, "serve: --config FILE is required", "", ""},
		{"serve takes no argument", []string{"serve", "--config", "x.yaml", "extra"}, "serve: unexpected arguments extra", "", ""},
		{"envoy-config needs a config", []string{"envoy-config"}, "envoy-config: --config FILE is required", "", ""},
		{"envoy-config, a missing file", []string{"envoy-config", "--config", filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml", "", ""},
		{"smoke takes no argument", []string{"smoke", "extra"}, "smoke: unexpected arguments extra", "", ""},
		{"smoke, an unknown flag", []string{"smoke", "--admn", "x"}, "flag provided but not defined: -admn", "", "Usage of smoke:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := runCmd(t.Context(), tc.args...)
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if !strings.Contains(stdout, tc.wantOut) || !strings.Contains(stderr, tc.wantSE) {
				t.Fatalf("stdout %q (want %q), stderr %q (want %q)", stdout, tc.wantOut, stderr, tc.wantSE)
			}
		})
	}
}

// TestSmokeFailsAgainstNothing: smoke against a closed port reports every
// check failed and returns an error (a non-zero exit).
func TestSmokeFailsAgainstNothing(t *testing.T) {
	url := "http://" + closedAddr(t)
	stdout, _, err := runCmd(t.Context(), "smoke", "--url", url)
	if err == nil || err.Error() != "smoke: 6 of 6 checks failed against "+url {
		t.Fatalf("error %v", err)
	}
	if n := strings.Count(stdout, "FAIL  "); n != 6 {
		t.Fatalf("%d FAIL lines:\n%s", n, stdout)
	}
}
