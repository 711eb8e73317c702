package extproc

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

const ms = time.Millisecond

// testPolicy has every source configured, each at a distinct value, so a
// test's want names the source that won.
var testPolicy = SLOPolicy{
	TTFT: 2000 * ms, TPOT: 100 * ms,
	MinTTFT: 500 * ms, MinTPOT: 25 * ms,
	Models: map[string]map[state.Priority]SLOTargets{
		"m":       {state.PriorityCritical: {TTFT: 800 * ms, TPOT: 40 * ms}},
		"partial": {state.PriorityStandard: {TPOT: 60 * ms}},
	},
	Objectives: map[string]SLOTargets{"chat": {TTFT: 1200 * ms}},
}

func obj(d time.Duration, s scheduler.SLOSource) scheduler.Objective {
	return scheduler.NewObjective(d, s)
}

// Every source of an objective, in order, and the bound on the headers.
func TestResolveSLO(t *testing.T) {
	anonymous := Anonymous
	trusted := Identity{Tenant: "t", MaxPriority: state.PriorityCritical, MinTTFT: 100 * ms, MinTPOT: 5 * ms}
	loose := Identity{Tenant: "t", MinTTFT: 3 * time.Second, MinTPOT: 200 * ms}
	for _, tc := range []struct {
		name      string
		asked     SLOTargets
		id        Identity
		model     string
		priority  state.Priority
		objective string
		want      scheduler.SLO
	}{
		{
			"defaults",
			SLOTargets{},
			anonymous, "other", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(2000*ms, scheduler.SLODefault), TPOT: obj(100*ms, scheduler.SLODefault)},
		},
		{
			"headers within the router's bound",
			SLOTargets{TTFT: 700 * ms, TPOT: 30 * ms},
			anonymous, "m", state.PriorityCritical, "chat",
			scheduler.SLO{TTFT: obj(700*ms, scheduler.SLOHeader), TPOT: obj(30*ms, scheduler.SLOHeader)},
		},
		{
			"headers at the bound exactly",
			SLOTargets{TTFT: 500 * ms, TPOT: 25 * ms},
			anonymous, "m", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(500*ms, scheduler.SLOHeader), TPOT: obj(25*ms, scheduler.SLOHeader)},
		},
		{
			"anonymous clamped to the router's bound",
			SLOTargets{TTFT: 1 * ms, TPOT: 1 * ms},
			anonymous, "m", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(500*ms, scheduler.SLOClamped), TPOT: obj(25*ms, scheduler.SLOClamped)},
		},
		{
			"a key without bounds gets the router's",
			SLOTargets{TTFT: 200 * ms},
			Identity{Tenant: "t"},
			"other", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(500*ms, scheduler.SLOClamped), TPOT: obj(100*ms, scheduler.SLODefault)},
		},
		{
			"a trusted key may ask tighter",
			SLOTargets{TTFT: 200 * ms, TPOT: 10 * ms},
			trusted, "other", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(200*ms, scheduler.SLOHeader), TPOT: obj(10*ms, scheduler.SLOHeader)},
		},
		{
			"a trusted key is bounded too",
			SLOTargets{TTFT: 50 * ms, TPOT: 1 * ms},
			trusted, "other", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(100*ms, scheduler.SLOClamped), TPOT: obj(5*ms, scheduler.SLOClamped)},
		},
		{
			"a key's bound may be looser than the router's",
			SLOTargets{TTFT: 1000 * ms, TPOT: 300 * ms},
			loose, "other", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(3000*ms, scheduler.SLOClamped), TPOT: obj(300*ms, scheduler.SLOHeader)},
		},
		{
			"objective, then model, per objective",
			SLOTargets{},
			anonymous, "m", state.PriorityCritical, "chat",
			scheduler.SLO{TTFT: obj(1200*ms, scheduler.SLOObjective), TPOT: obj(40*ms, scheduler.SLOConfig)},
		},
		{
			"model at its priority",
			SLOTargets{},
			anonymous, "m", state.PriorityCritical, "",
			scheduler.SLO{TTFT: obj(800*ms, scheduler.SLOConfig), TPOT: obj(40*ms, scheduler.SLOConfig)},
		},
		{
			"model at another priority",
			SLOTargets{},
			anonymous, "m", state.PriorityBatch, "",
			scheduler.SLO{TTFT: obj(2000*ms, scheduler.SLODefault), TPOT: obj(100*ms, scheduler.SLODefault)},
		},
		{
			"model with one objective set",
			SLOTargets{},
			anonymous, "partial", state.PriorityStandard, "",
			scheduler.SLO{TTFT: obj(2000*ms, scheduler.SLODefault), TPOT: obj(60*ms, scheduler.SLOConfig)},
		},
		{
			"unknown objective ignored",
			SLOTargets{},
			anonymous, "other", state.PriorityStandard, "gold",
			scheduler.SLO{TTFT: obj(2000*ms, scheduler.SLODefault), TPOT: obj(100*ms, scheduler.SLODefault)},
		},
		{
			"one header, the other configured",
			SLOTargets{TPOT: 50 * ms},
			anonymous, "m", state.PriorityCritical, "",
			scheduler.SLO{TTFT: obj(800*ms, scheduler.SLOConfig), TPOT: obj(50*ms, scheduler.SLOHeader)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testPolicy.resolve(tc.asked, tc.id, tc.model, tc.priority, tc.objective); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The header parser takes whole milliseconds from 1 to an hour; anything
// else is a 400 naming the header.
func TestParseSLOHeader(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration // 0: refused
	}{
		{"250", 250 * ms},
		{" 40 ", 40 * ms},
		{"007", 7 * ms},
		{"1", 1 * ms},
		{"3600000", time.Hour},
		{"3600001", 0},
		{"99999999999999999999", 0},
		{"0", 0},
		{"-5", 0},
		{"+5", 0},
		{"1.5", 0},
		{"1e3", 0},
		{"250ms", 0},
		{"0x10", 0},
		{"1_000", 0},
		{"", 0},
		{"fast", 0},
	} {
		got, err := parseSLOHeader(headerSLOTPOT, tc.value)
		if tc.want > 0 {
			if err != nil || got != tc.want {
				t.Errorf("%q: %v, %v; want %v", tc.value, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: accepted as %v", tc.value, got)
			continue
		}
		e := classify(err)
		body := e.body()
		if e.Status != 400 || gjson.GetBytes(body, "error.param").String() != headerSLOTPOT ||
			gjson.GetBytes(body, "error.code").String() != "invalid_slo" ||
			gjson.GetBytes(body, "error.type").String() != "invalid_request_error" ||
			!strings.Contains(gjson.GetBytes(body, "error.message").String(), headerSLOTPOT) {
			t.Errorf("%q: %d %s", tc.value, e.Status, body)
		}
	}
}

// Our headers win over llm-d's whatever their order; llm-d's alone count.
func TestReadSLOHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []string
		want    SLOTargets
	}{
		{"ours", []string{headerSLOTTFT, "300", headerSLOTPOT, "30"}, SLOTargets{TTFT: 300 * ms, TPOT: 30 * ms}},
		{"llm-d's", []string{headerLLMDSLOTTFT, "400", headerLLMDSLOTPOT, "40"}, SLOTargets{TTFT: 400 * ms, TPOT: 40 * ms}},
		{"ours after llm-d's", []string{headerLLMDSLOTTFT, "400", headerSLOTTFT, "300"}, SLOTargets{TTFT: 300 * ms}},
		{"ours before llm-d's", []string{headerSLOTPOT, "30", headerLLMDSLOTPOT, "40"}, SLOTargets{TPOT: 30 * ms}},
		{"a malformed llm-d value under ours is not read", []string{headerSLOTTFT, "300", headerLLMDSLOTTFT, "x"}, SLOTargets{TTFT: 300 * ms}},
		{"none", []string{"x-other", "1"}, SLOTargets{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s sloHeaders
			for i := 0; i+1 < len(tc.headers); i += 2 {
				s.read(tc.headers[i], tc.headers[i+1])
			}
			got, err := s.parse()
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// Through the exchange: the headers' objectives, bounded by the key, reach
// the scheduler's request (and so its decision); a malformed one is a 400
// naming the header, before any body is read.
func TestSLOThroughExchange(t *testing.T) {
	id := Identity{Tenant: "t", MaxPriority: state.PriorityCritical, MinTTFT: 300 * ms}
	for _, tc := range []struct {
		name    string
		headers []string
		want    scheduler.SLO
		param   string // a 400 naming this header
	}{
		{
			"header and key bound",
			[]string{headerSLOTTFT, "100", headerLLMDSLOTPOT, "30"},
			scheduler.SLO{TTFT: obj(300*ms, scheduler.SLOClamped), TPOT: obj(30*ms, scheduler.SLOHeader)},
			"",
		},
		{
			"objective and model",
			[]string{headerObjective, "chat", headerPriority, "critical"},
			scheduler.SLO{TTFT: obj(1200*ms, scheduler.SLOObjective), TPOT: obj(40*ms, scheduler.SLOConfig)},
			"",
		},
		{"malformed", []string{headerSLOTTFT, "500", headerLLMDSLOTPOT, "1.5"}, scheduler.SLO{}, headerLLMDSLOTPOT},
		{"absurd", []string{headerSLOTTFT, strconv.Itoa(int(2 * time.Hour / ms))}, scheduler.SLO{}, headerSLOTTFT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := &fakeScheduler{worker: "w1"}
			st := runWith(t, sched, Options{Auth: keyAuth{id}, SLO: testPolicy})
			h := append([]string{":method", "POST", ":path", "/v1/chat/completions", "authorization", "Bearer k"}, tc.headers...)
			r := st.roundTrip(t, reqHeaders(false, h...))
			if tc.param != "" {
				im := r.GetImmediateResponse()
				if im.GetStatus().GetCode() != 400 || gjson.GetBytes(im.GetBody(), "error.param").String() != tc.param ||
					gjson.GetBytes(im.GetBody(), "error.code").String() != "invalid_slo" {
					t.Fatalf("got %d %s", im.GetStatus().GetCode(), im.GetBody())
				}
				return
			}
			st.roundTrip(t, reqBody(`{"model":"m","messages":[]}`))
			if got := sched.lastReq.SLO; got != tc.want {
				t.Fatalf("scheduler got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseSLOHeader: any value either parses to whole milliseconds within
// the bounds, equal to its digits, or is a 400 of kind ErrBadSLO naming
// the header.
func FuzzParseSLOHeader(f *testing.F) {
	for _, seed := range []string{"250", "1", "3600000", "3600001", "0", "-1", "1.5", "", " 7 ", "+3", "1e3", "0x1f", "١٢", "18446744073709551616"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		d, err := parseSLOHeader(headerSLOTTFT, value)
		if err != nil {
			if !errors.Is(err, ErrBadSLO) || classify(err).Status != 400 || classify(err).Param != headerSLOTTFT {
				t.Fatalf("%q: error %v is not a 400 naming the header", value, err)
			}
			return
		}
		if d < ms || d > MaxSLO || d%ms != 0 {
			t.Fatalf("%q: accepted %v", value, d)
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if perr != nil || time.Duration(n)*ms != d {
			t.Fatalf("%q: accepted %v, not its digits", value, d)
		}
	})
}
