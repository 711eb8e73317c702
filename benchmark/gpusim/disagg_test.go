package gpusim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// a100 is the calibrated engine of the P/D tests, with a KV link of gbps.
func a100(gbps float64) Config {
	return simConfig(func(c *Config) { c.Profile, c.KVLinkGbps = "a100-llama3-8b", gbps })
}

// xfer is the link time of tokens KV tokens of Llama-3-8B at gbps.
func xfer(tokens int, gbps float64) time.Duration {
	return time.Duration(float64(tokens) * (128 << 10) * 8 / (gbps * 1e9) * float64(time.Second))
}

func TestRemotePrefillLoadsInsteadOfComputing(t *testing.T) {
	const prompt, out, gbps = 8000, 50, 200
	local := []SimRequest{{PromptTokens: prompt, OutputTokens: out}}
	remote := []SimRequest{{PromptTokens: prompt, OutputTokens: out, RemotePrefill: true}}
	check := func(e *Engine) error { return e.checkInvariants() }

	lres, _, err := simulate(a100(gbps), local, check)
	if err != nil {
		t.Fatal(err)
	}
	rres, _, err := simulate(a100(gbps), remote, check)
	if err != nil {
		t.Fatal(err)
	}
	// Without a link the flag is ignored: the prompt is prefilled here.
	nres, _, err := simulate(a100(0), remote, check)
	if err != nil {
		t.Fatal(err)
	}
	if lres[0].Tokens != out || rres[0].Tokens != out {
		t.Fatalf("tokens: local %d, remote %d, want %d", lres[0].Tokens, rres[0].Tokens, out)
	}
	if nres[0].TTFT() != lres[0].TTFT() {
		t.Errorf("no link: TTFT %v, want the local %v", nres[0].TTFT(), lres[0].TTFT())
	}
	// The load of all but the last token, then one step computing it.
	load := xfer(prompt-1, gbps)
	prof, _ := LookupProfile("a100-llama3-8b")
	step := prof.StepTime(1, prompt, 1)
	if got := rres[0].TTFT(); got < load+step || got > load+step+time.Millisecond {
		t.Errorf("remote TTFT %v, want the load %v plus one step %v", got, load, step)
	}
	if rres[0].TTFT() >= lres[0].TTFT()/4 {
		t.Errorf("remote TTFT %v not well under the local prefill's %v", rres[0].TTFT(), lres[0].TTFT())
	}
	// Decoding is the same once the KV is there.
	ltpot := (lres[0].Done - lres[0].FirstToken) / (out - 1)
	rtpot := (rres[0].Done - rres[0].FirstToken) / (out - 1)
	if d := math.Abs(float64(ltpot - rtpot)); d > float64(time.Millisecond) {
		t.Errorf("TPOT local %v, remote %v", ltpot, rtpot)
	}
}

func TestRemotePrefillLinkQueuesAndCacheSavesBytes(t *testing.T) {
	const prompt, gbps = 4000, 100
	blocks := ChatBlockHashes(string(AppendMooncakeBlockText(nil, 7)) + string(AppendMooncakeBlockText(nil, 8)))
	cached := CacheableBlocks(prompt, len(blocks)) * blockSize
	reqs := []SimRequest{
		// Two loads at once share the link one after the other.
		{PromptTokens: prompt, OutputTokens: 5, RemotePrefill: true},
		{PromptTokens: prompt, OutputTokens: 5, RemotePrefill: true},
		// Computed here, so its blocks are cached...
		{Arrival: 2 * time.Second, PromptTokens: prompt, OutputTokens: 5, Blocks: blocks},
		// ...and this one loads only what the cache lacks.
		{Arrival: 4 * time.Second, PromptTokens: prompt, OutputTokens: 5, Blocks: blocks, RemotePrefill: true},
	}
	res, _, err := simulate(a100(gbps), reqs, func(e *Engine) error { return e.checkInvariants() })
	if err != nil {
		t.Fatal(err)
	}
	one := xfer(prompt-1, gbps)
	if res[1].FirstToken < 2*one {
		t.Errorf("second load's first token at %v, before two loads (%v)", res[1].FirstToken, 2*one)
	}
	if res[3].CachedTokens != cached || cached == 0 {
		t.Errorf("cached tokens %d, want %d", res[3].CachedTokens, cached)
	}
	if got, want := res[3].TTFT(), xfer(prompt-1-cached, gbps); got < want || got > want+50*time.Millisecond {
		t.Errorf("TTFT with a cached prefix %v, want about the load of the rest %v", got, want)
	}
}

func TestRemotePrefillUnderPressure(t *testing.T) {
	reqs := heavyLoad(120, 3)
	for i := range reqs {
		reqs[i].RemotePrefill = i%2 == 0
	}
	cfg := a100(50)
	cfg.GPUMemUtil = 0.3
	res, st, err := simulate(cfg, reqs, func(e *Engine) error { return e.checkInvariants() })
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Rejected || r.Tokens != reqs[i].OutputTokens {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	if st.Preemptions == 0 {
		t.Error("no preemption: the load does not press on the KV cache")
	}
}

func TestSimpleModeRemotePrefill(t *testing.T) {
	cfg := simConfig(func(c *Config) { c.TTFTMs, c.KVLinkGbps, c.KVBytesPerToken = 500, 8, 1e6 })
	res, _, err := Simulate(cfg, []SimRequest{{PromptTokens: 1001, OutputTokens: 3, RemotePrefill: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res[0].TTFT(), time.Second; got != want { // 1000 tokens × 1 MB at 1 GB/s
		t.Errorf("TTFT %v, want the load %v instead of ttft_ms", got, want)
	}
}

// pdPost posts body to url and decodes the JSON answer.
func pdPost(t *testing.T, url, body string) map[string]json.RawMessage {
	t.Helper()
	resp := post(t, url, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHTTPPrefillThenDecode(t *testing.T) {
	pcfg := instantConfig(func(c *Config) { c.ID, c.KVLinkGbps = "prefill-0", 100 })
	dcfg := instantConfig(func(c *Config) { c.ID, c.KVLinkGbps = "decode-0", 100 })
	_, purl := startServer(t, pcfg)
	_, durl := startServer(t, dcfg)

	// The sidecar's prefill request, as llm-d's sends it.
	pre := pdPost(t, purl+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],
		"gpusim_prompt_tokens":100,"max_tokens":1,"stream":false,
		"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,
		"remote_block_ids":null,"remote_host":null,"remote_port":null}}`)
	var kv KVTransferParams
	if err := json.Unmarshal(pre["kv_transfer_params"], &kv); err != nil {
		t.Fatalf("prefill response kv_transfer_params: %v (%s)", err, pre["kv_transfer_params"])
	}
	host, port, _ := net.SplitHostPort(purl[len("http://"):])
	if !kv.DoRemotePrefill || kv.DoRemoteDecode || kv.RemoteEngineID == nil || *kv.RemoteEngineID != "prefill-0" ||
		kv.RemoteHost == nil || *kv.RemoteHost != host || kv.RemotePort == nil || strconv.Itoa(*kv.RemotePort) != port ||
		len(kv.RemoteBlockIDs) != 7 {
		t.Fatalf("kv_transfer_params %s, want prefill-0 at %s:%s with 7 blocks", pre["kv_transfer_params"], host, port)
	}

	decode := func(params []byte) {
		out := pdPost(t, durl+"/v1/chat/completions", fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],
			"gpusim_prompt_tokens":100,"max_tokens":4,"kv_transfer_params":%s}`, params))
		if _, ok := out["kv_transfer_params"]; ok {
			t.Error("decode response carries kv_transfer_params")
		}
		var u usage
		_ = json.Unmarshal(out["usage"], &u)
		if u.CompletionTokens != 4 {
			t.Errorf("decode generated %d tokens, want 4", u.CompletionTokens)
		}
	}
	decode(pre["kv_transfer_params"])
	fams := scrape(t, durl)
	if n, _ := value(fams, "vllm:nixl_xfer_time_seconds", "m"); n != 1 {
		t.Errorf("decode transfers %v, want 1", n)
	}
	if sum := fams["vllm:nixl_bytes_transferred"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != 99*128<<10 {
		t.Errorf("bytes transferred %v, want 99 tokens' KV", sum)
	}

	// A prefill worker gone: the decode worker prefills itself.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	*kv.RemotePort = dead
	b, _ := json.Marshal(kv)
	decode(b)
	fams = scrape(t, durl)
	if n, _ := value(fams, "vllm:nixl_num_failed_transfers_total", "m"); n != 1 {
		t.Errorf("failed transfers %v, want 1", n)
	}
	if n, _ := value(fams, "vllm:nixl_xfer_time_seconds", "m"); n != 1 {
		t.Errorf("decode transfers %v after a failed one, want still 1", n)
	}
	// Without a connector, the params change nothing and show no NIXL figures.
	_, plain := startServer(t, instantConfig(nil))
	out := pdPost(t, plain+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],
		"max_tokens":1,"kv_transfer_params":{"do_remote_decode":true}}`)
	if _, ok := out["kv_transfer_params"]; ok {
		t.Error("a GPU without a connector answered kv_transfer_params")
	}
	if _, ok := scrape(t, plain)["vllm:nixl_xfer_time_seconds"]; ok {
		t.Error("a GPU without a connector shows NIXL metrics")
	}
}
