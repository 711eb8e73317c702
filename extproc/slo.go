package extproc

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/state"
)

// The headers that carry a request's latency objectives, in whole
// milliseconds. llm-d's names are accepted too; ours win when both are
// sent.
const (
	headerSLOTTFT     = "x-llm-slo-ttft-ms"
	headerSLOTPOT     = "x-llm-slo-tpot-ms"
	headerLLMDSLOTTFT = "x-llm-d-slo-ttft-ms"
	headerLLMDSLOTPOT = "x-llm-d-slo-tpot-ms"
)

// MaxSLO is the loosest objective a header may ask for; anything above is
// a mistake (seconds sent as milliseconds), not an objective.
const MaxSLO = time.Hour

// ErrBadSLO: a latency objective header that is not a whole number of
// milliseconds between 1 and MaxSLO.
var ErrBadSLO = errors.New("invalid latency objective")

// SLOTargets are a TTFT and a TPOT objective; 0 is unset.
type SLOTargets struct {
	TTFT, TPOT time.Duration
}

// SLOPolicy is how the router fills and bounds requests' latency
// objectives. Each objective is, in order: the request's header, no
// tighter than its key's bound (Identity.MinTTFT, MinTPOT; for a key with
// none, and with keys off, MinTTFT and MinTPOT here); else its llm-d
// inference objective's (Objectives); else its model's at its priority
// (Models); else the default (TTFT, TPOT).
type SLOPolicy struct {
	TTFT, TPOT       time.Duration
	MinTTFT, MinTPOT time.Duration
	Models           map[string]map[state.Priority]SLOTargets
	Objectives       map[string]SLOTargets
}

// sloHeaders are the latency objective headers a request sent, each with
// the name it came under (the 400 names it).
type sloHeaders struct {
	ttft, tpot sloHeader
}

type sloHeader struct{ name, value string }

// read takes key's value if it is an objective header and reports whether
// it was; our header wins over llm-d's.
func (s *sloHeaders) read(key, value string) bool {
	switch key {
	case headerSLOTTFT:
		s.ttft = sloHeader{key, value}
	case headerSLOTPOT:
		s.tpot = sloHeader{key, value}
	case headerLLMDSLOTTFT:
		if s.ttft.name != headerSLOTTFT {
			s.ttft = sloHeader{key, value}
		}
	case headerLLMDSLOTPOT:
		if s.tpot.name != headerSLOTPOT {
			s.tpot = sloHeader{key, value}
		}
	default:
		return false
	}
	return true
}

// parse checks the headers sent; an objective not sent is 0.
func (s sloHeaders) parse() (SLOTargets, error) {
	var out SLOTargets
	var err error
	if s.ttft.name != "" {
		if out.TTFT, err = parseSLOHeader(s.ttft.name, s.ttft.value); err != nil {
			return SLOTargets{}, err
		}
	}
	if s.tpot.name != "" {
		if out.TPOT, err = parseSLOHeader(s.tpot.name, s.tpot.value); err != nil {
			return SLOTargets{}, err
		}
	}
	return out, nil
}

// parseSLOHeader reads one objective header: whole milliseconds, 1 to
// MaxSLO. Anything else is an ErrBadSLO that names the header.
func parseSLOHeader(name, value string) (time.Duration, error) {
	v := strings.TrimSpace(value)
	ms, err := strconv.ParseUint(v, 10, 32)
	if err != nil || ms == 0 || time.Duration(ms)*time.Millisecond > MaxSLO {
		return 0, &paramError{
			Param: name, Kind: ErrBadSLO,
			Msg: name + " must be a whole number of milliseconds from 1 to " +
				strconv.FormatInt(MaxSLO.Milliseconds(), 10) + ", got " + strconv.Quote(value),
		}
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// resolve is the request's objectives: asked (its headers) bounded by id,
// else the configuration of its llm-d objective, of its model at its
// priority, else the defaults.
func (p SLOPolicy) resolve(asked SLOTargets, id Identity, model string, priority state.Priority, objective string) scheduler.SLO {
	byObjective := p.Objectives[objective]
	byModel := p.Models[model][priority]
	return scheduler.SLO{
		TTFT: pickObjective(asked.TTFT, boundOf(id.MinTTFT, p.MinTTFT), byObjective.TTFT, byModel.TTFT, p.TTFT),
		TPOT: pickObjective(asked.TPOT, boundOf(id.MinTPOT, p.MinTPOT), byObjective.TPOT, byModel.TPOT, p.TPOT),
	}
}

// boundOf is the key's bound, or the router's for a key with none.
func boundOf(key, router time.Duration) time.Duration {
	if key > 0 {
		return key
	}
	return router
}

func pickObjective(asked, bound, byObjective, byModel, byDefault time.Duration) scheduler.Objective {
	switch {
	case asked > 0 && asked < bound:
		return scheduler.NewObjective(bound, scheduler.SLOClamped)
	case asked > 0:
		return scheduler.NewObjective(asked, scheduler.SLOHeader)
	case byObjective > 0:
		return scheduler.NewObjective(byObjective, scheduler.SLOObjective)
	case byModel > 0:
		return scheduler.NewObjective(byModel, scheduler.SLOConfig)
	}
	return scheduler.NewObjective(byDefault, scheduler.SLODefault)
}
