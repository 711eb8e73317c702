package gpusim

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Metrics formats accepted by --metrics-format.
const (
	FormatVLLM       = "vllm"        // both vllm:kv_cache_usage_perc and vllm:gpu_cache_usage_perc
	FormatVLLMLegacy = "vllm-legacy" // only vllm:gpu_cache_usage_perc
	FormatVLLMV1     = "vllm-v1"     // only vllm:kv_cache_usage_perc
	FormatSGLang     = "sglang"
	FormatLlamaCpp   = "llamacpp"
	FormatTRTLLM     = "trtllm"
)

var metricsFormats = []string{FormatVLLM, FormatVLLMLegacy, FormatVLLMV1, FormatSGLang, FormatLlamaCpp, FormatTRTLLM}

// Config describes one simulated GPU. Its YAML field names are those of the
// fleet file; each has a command-line flag of the same name with dashes.
type Config struct {
	ID     string   `yaml:"id"`
	Listen string   `yaml:"listen"`
	Models []string `yaml:"models"`

	// Simple timing (used when Profile is empty).
	TokensPerSecond  float64 `yaml:"tokens_per_second"`
	TTFTMs           float64 `yaml:"ttft_ms"`
	MaxConcurrency   int     `yaml:"max_concurrency"`
	KVCapacityTokens int     `yaml:"kv_capacity_tokens"`

	// Calibrated continuous batching.
	Profile          string  `yaml:"profile"`
	MaxNumSeqs       int     `yaml:"max_num_seqs"`
	MaxBatchedTokens int     `yaml:"max_batched_tokens"`
	GPUMemUtil       float64 `yaml:"gpu_mem_util"`

	// PrefixCache turns on prefix (KV) caching in simple and calibrated
	// modes (not with slots); off, the engine behaves as before it had one.
	PrefixCache bool `yaml:"prefix_cache"`

	// LoRA adapters of Models[0], as vLLM with --enable-lora: MaxLoras
	// GPU slots (0: LoRA off), the adapters served from the start
	// (LoRAModules, name=path or name), those a run-time load finds
	// (LoRAAvailable, by path; empty: any), and the time an adapter takes
	// to enter a slot.
	MaxLoras      int      `yaml:"max_loras"`
	LoRAModules   []string `yaml:"lora_modules"`
	LoRAAvailable []string `yaml:"lora_available"`
	LoRALoadMs    float64  `yaml:"lora_load_ms"`

	// llama.cpp-like fixed slots (0 = off).
	Slots   int `yaml:"slots"`
	CtxSize int `yaml:"ctx_size"`

	MetricsFormat string `yaml:"metrics_format"`

	// StreamSummary makes a streamed response cheap for a benchmark
	// client: the first token's event as soon as it exists, then one event
	// with all the other tokens at the end, and a usage chunk carrying the
	// engine's inter-token gaps (gpusim_itl_us).
	StreamSummary bool `yaml:"stream_summary"`

	// KVLinkGbps gives the GPU a KV connector, as vLLM's NIXL connector:
	// the bandwidth in Gbit/s over which it loads the KV of a prompt that
	// a prefill worker computed (kv_transfer_params, disagg.go), and
	// prefill-only requests answer with the params a decode worker
	// needs. 0: no connector; kv_transfer_params are ignored.
	KVLinkGbps float64 `yaml:"kv_link_gbps"`
	// KVBytesPerToken is simple mode's KV size of one token, for the
	// transfer time (a calibrated profile has its own).
	KVBytesPerToken float64 `yaml:"kv_bytes_per_token"`

	// Slowdown multiplies every simulated duration from the start (the
	// /admin/config knob of the same name changes it at run time). A
	// benchmark slows a fleet down by a common factor so that the machine
	// running the proxies is not what saturates: the GPUs' dynamics scale,
	// their ratios stay.
	Slowdown float64 `yaml:"slowdown"`

	// Faults.
	ErrorRate float64 `yaml:"error_rate"`
	ExitAfter int     `yaml:"exit_after"`
	LoadingMs int     `yaml:"loading_ms"`

	Seed int64 `yaml:"seed"`
}

// DefaultConfig returns the values used for every flag or fleet field that is
// not given.
func DefaultConfig() Config {
	return Config{
		TokensPerSecond:  50,
		TTFTMs:           50,
		KVCapacityTokens: 65536,
		MaxNumSeqs:       256,
		MaxBatchedTokens: 512,
		GPUMemUtil:       0.9,
		PrefixCache:      true,
		CtxSize:          4096,
		LoRALoadMs:       DefaultLoRALoadMs,
		KVBytesPerToken:  128 << 10, // Llama-3-8B, fp16
		MetricsFormat:    FormatVLLM,
		Slowdown:         1,
		Seed:             1,
	}
}

// Calibrated reports whether the config uses a profiled step-time model.
func (c *Config) Calibrated() bool { return c.Profile != "" }

// Validate checks the config and fills ID from Listen when empty.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Listen == "" {
		bad("listen address is required")
	}
	if c.ID == "" {
		c.ID = c.Listen
	}
	c.Models = splitList(c.Models)
	if len(c.Models) == 0 {
		bad("at least one model is required")
	}
	for i, m := range c.Models {
		if slices.Contains(c.Models[:i], m) {
			bad("model %q listed twice", m)
		}
	}
	if err := c.validateLoRA(); err != nil {
		errs = append(errs, err)
	}
	if c.Profile != "" {
		if _, err := LookupProfile(c.Profile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.TokensPerSecond < 0 || c.TTFTMs < 0 {
		bad("tokens_per_second and ttft_ms must be >= 0")
	}
	if c.MaxConcurrency < 0 || c.Slots < 0 || c.ExitAfter < 0 || c.LoadingMs < 0 {
		bad("max_concurrency, slots, exit_after and loading_ms must be >= 0")
	}
	if c.KVCapacityTokens < 1 || c.MaxNumSeqs < 1 || c.MaxBatchedTokens < 1 || c.CtxSize < 1 {
		bad("kv_capacity_tokens, max_num_seqs, max_batched_tokens and ctx_size must be >= 1")
	}
	if c.GPUMemUtil <= 0 || c.GPUMemUtil > 1 {
		bad("gpu_mem_util must be in (0, 1]")
	}
	if c.KVLinkGbps < 0 || !(c.KVBytesPerToken > 0) {
		bad("kv_link_gbps must be >= 0 and kv_bytes_per_token > 0")
	}
	if !(c.Slowdown > 0) {
		bad("slowdown must be > 0")
	}
	if c.ErrorRate < 0 || c.ErrorRate > 1 {
		bad("error_rate must be in [0, 1]")
	}
	if !slices.Contains(metricsFormats, c.MetricsFormat) {
		bad("metrics_format %q unknown (known: %s)", c.MetricsFormat, strings.Join(metricsFormats, ", "))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gpu %s: %w", c.ID, err)
	}
	return nil
}

// validateLoRA checks the LoRA fields; it splits the adapter lists.
func (c *Config) validateLoRA() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	c.LoRAModules, c.LoRAAvailable = splitList(c.LoRAModules), splitList(c.LoRAAvailable)
	if c.MaxLoras < 0 {
		bad("max_loras must be >= 0, got %d", c.MaxLoras)
	}
	if c.MaxLoras == 0 && (len(c.LoRAModules) > 0 || len(c.LoRAAvailable) > 0) {
		bad("lora_modules and lora_available need max_loras >= 1")
	}
	if c.MaxLoras > 0 && c.Slots > 0 {
		bad("max_loras: llama.cpp slots mode serves no LoRA adapters")
	}
	if !(c.LoRALoadMs >= 0) {
		bad("lora_load_ms must be >= 0, got %v", c.LoRALoadMs)
	}
	seen := map[string]bool{}
	for _, s := range c.LoRAModules {
		m, err := ParseLoRAModule(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("lora_modules: %w", err))
		case slices.Contains(c.Models, m.Name):
			bad("lora_modules: adapter %q has a model's name", m.Name)
		case seen[m.Name]:
			bad("lora_modules: adapter %q listed twice", m.Name)
		}
		seen[m.Name] = true
	}
	for _, s := range c.LoRAAvailable {
		if _, err := ParseLoRAModule(s); err != nil {
			errs = append(errs, fmt.Errorf("lora_available: %w", err))
		}
	}
	return errors.Join(errs...)
}

// splitList splits comma-separated entries and drops empty ones.
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// registerFlags binds the per-GPU flags to c.
func registerFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.ID, "id", c.ID, "worker id sent as x-gpusim-id (default: the listen address)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "address to listen on, e.g. 127.0.0.1:8000")
	fs.Var((*stringList)(&c.Models), "model", "model name served (repeatable or comma-separated)")
	fs.Float64Var(&c.TokensPerSecond, "tokens-per-second", c.TokensPerSecond, "simple mode: decode rate per stream (0 = instant)")
	fs.Float64Var(&c.TTFTMs, "ttft-ms", c.TTFTMs, "simple mode: time to first token in ms")
	fs.IntVar(&c.MaxConcurrency, "max-concurrency", c.MaxConcurrency, "simple mode: requests generating at once (0 = unlimited)")
	fs.IntVar(&c.KVCapacityTokens, "kv-capacity-tokens", c.KVCapacityTokens, "simple mode: nominal KV capacity in tokens")
	fs.StringVar(&c.Profile, "profile", c.Profile, "calibrated mode: "+strings.Join(ProfileNames(), "|"))
	fs.IntVar(&c.MaxNumSeqs, "max-num-seqs", c.MaxNumSeqs, "calibrated mode: max sequences in a batch")
	fs.IntVar(&c.MaxBatchedTokens, "max-batched-tokens", c.MaxBatchedTokens, "calibrated mode: token budget of one step (chunked prefill)")
	fs.Float64Var(&c.GPUMemUtil, "gpu-mem-util", c.GPUMemUtil, "calibrated mode: fraction of GPU memory used")
	fs.BoolVar(&c.PrefixCache, "prefix-cache", c.PrefixCache, "cache prompt blocks across requests, as vLLM's automatic prefix caching (simple and calibrated modes)")
	fs.IntVar(&c.MaxLoras, "max-loras", c.MaxLoras, "LoRA: adapters of the first model held in GPU slots at once, as vLLM's --max-loras (0 = LoRA off)")
	fs.Var((*stringList)(&c.LoRAModules), "lora-modules", "LoRA: adapters served from the start, name=path or name (repeatable or comma-separated)")
	fs.Var((*stringList)(&c.LoRAAvailable), "lora-available", "LoRA: adapter paths /v1/load_lora_adapter finds (repeatable or comma-separated; none given: any)")
	fs.Float64Var(&c.LoRALoadMs, "lora-load-ms", c.LoRALoadMs, "LoRA: time an adapter takes to enter a GPU slot, paid by the first forward pass using it")
	fs.IntVar(&c.Slots, "slots", c.Slots, "llama.cpp mode: fixed number of slots (0 = off)")
	fs.IntVar(&c.CtxSize, "ctx-size", c.CtxSize, "llama.cpp mode: context tokens per slot")
	fs.StringVar(&c.MetricsFormat, "metrics-format", c.MetricsFormat, "metric names on /metrics: "+strings.Join(metricsFormats, "|"))
	fs.BoolVar(&c.StreamSummary, "stream-summary", c.StreamSummary, "streams send the first token, then the rest in one event at the end with the inter-token gaps in the usage chunk (cheap benchmark clients)")
	fs.Float64Var(&c.KVLinkGbps, "kv-link-gbps", c.KVLinkGbps, "KV connector link in Gbit/s: load the KV of prompts prefilled elsewhere (kv_transfer_params, as vLLM's NIXL connector); 0 = no connector")
	fs.Float64Var(&c.KVBytesPerToken, "kv-bytes-per-token", c.KVBytesPerToken, "simple mode: KV bytes of one token, for the transfer time (calibrated profiles have their own)")
	fs.Float64Var(&c.Slowdown, "slowdown", c.Slowdown, "multiply every simulated duration (steps, TTFT, token gaps) by this factor")
	fs.Float64Var(&c.ErrorRate, "error-rate", c.ErrorRate, "fraction of inference requests answered 503")
	fs.IntVar(&c.ExitAfter, "exit-after", c.ExitAfter, "stop serving after answering N inference requests (0 = never)")
	fs.IntVar(&c.LoadingMs, "loading-ms", c.LoadingMs, "answer 503 Loading model for N ms after start")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "seed of the random fault injection")
}

// ParseFlags parses the serve command line. It returns one config, or one
// per GPU of the --fleet file, each validated. Flags given with --fleet are
// defaults for every fleet entry.
func ParseFlags(args []string, stderr io.Writer) ([]Config, error) {
	fs := flag.NewFlagSet("gpusim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := DefaultConfig()
	registerFlags(fs, &c)
	fleet := fs.String("fleet", "", "YAML file listing the GPUs to simulate, one listener each")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *fleet == "" {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return []Config{c}, nil
	}
	if c.Listen != "" || c.ID != "" {
		return nil, errors.New("--listen and --id are per GPU: give them in the fleet file")
	}
	data, err := os.ReadFile(*fleet)
	if err != nil {
		return nil, fmt.Errorf("read fleet: %w", err)
	}
	return ParseFleet(data, c)
}

// ParseFleet parses a fleet file: a YAML list of GPUs. Each entry starts from
// base, so omitted fields keep base's values; an entry without a seed gets
// base.Seed plus its index, so GPUs fail independently. IDs and listen
// addresses (other than port 0) must be unique.
func ParseFleet(data []byte, base Config) ([]Config, error) {
	var nodes []yaml.Node
	if err := yaml.Unmarshal(data, &nodes); err != nil {
		return nil, fmt.Errorf("parse fleet: %w", err)
	}
	if len(nodes) == 0 {
		return nil, errors.New("fleet lists no GPU")
	}
	out := make([]Config, 0, len(nodes))
	ids, addrs := map[string]bool{}, map[string]bool{}
	for i := range nodes {
		c := base
		c.Models = slices.Clone(base.Models)
		c.LoRAModules, c.LoRAAvailable = slices.Clone(base.LoRAModules), slices.Clone(base.LoRAAvailable)
		c.Seed = base.Seed + int64(i)
		// Re-encode so unknown fields are rejected (yaml.Node.Decode has no
		// strict mode).
		raw, err := yaml.Marshal(&nodes[i])
		if err != nil {
			return nil, fmt.Errorf("fleet entry %d: %w", i, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("fleet entry %d: %w", i, err)
		}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("fleet entry %d: %w", i, err)
		}
		if ids[c.ID] || addrs[c.Listen] {
			return nil, fmt.Errorf("fleet entry %d: id %q or listen %q used twice", i, c.ID, c.Listen)
		}
		ids[c.ID] = true
		if !strings.HasSuffix(c.Listen, ":0") { // port 0: each gets its own
			addrs[c.Listen] = true
		}
		out = append(out, c)
	}
	return out, nil
}
