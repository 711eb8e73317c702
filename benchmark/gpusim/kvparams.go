package gpusim

import (
	"net"
	"net/http"
	"strconv"
	"time"
)

// KVTransferParams is vLLM's kv_transfer_params, the request and response
// field of disaggregated serving with its NIXL connector (disagg.go).
// A prefill-only request carries {"do_remote_decode": true} (the other
// fields null); its response carries {"do_remote_prefill": true} with the
// prefill worker's engine id, host, port and the prompt's block ids, which
// the decode request then carries unchanged.
type KVTransferParams struct {
	DoRemoteDecode  bool    `json:"do_remote_decode"`
	DoRemotePrefill bool    `json:"do_remote_prefill"`
	RemoteEngineID  *string `json:"remote_engine_id"`
	RemoteBlockIDs  []int   `json:"remote_block_ids"`
	RemoteHost      *string `json:"remote_host"`
	RemotePort      *int    `json:"remote_port"`
	TPSize          int     `json:"tp_size,omitempty"`
}

// sideChannelTimeout bounds the decode worker's check that the prefill
// worker holding a prompt's KV still answers.
const sideChannelTimeout = 2 * time.Second

// kvTransfer applies req's kv_transfer_params on a GPU with a KV
// connector, and returns those its response must carry (nil: none). A
// decode request loads its prompt's KV when the prefill worker named
// answers on its host and port; otherwise the transfer counts as failed
// and the prompt is prefilled here, as vLLM recomputes a KV it could not
// read. A prefill-only request is answered with the params that name this
// GPU. Without a connector the params are ignored, as by vLLM.
func (s *Server) kvTransfer(r *http.Request, req *parsedRequest) *KVTransferParams {
	kv := req.kv
	if kv == nil || s.cfg.KVLinkGbps <= 0 {
		return nil
	}
	switch {
	case kv.DoRemotePrefill:
		if reachable(kv) {
			req.RemotePrefill = true
		} else {
			s.eng.failedTransfer(req.Model)
		}
		return nil
	case kv.DoRemoteDecode:
		host, port := "", 0
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			h, p, err := net.SplitHostPort(a.String())
			if err == nil {
				host = h
				port, _ = strconv.Atoi(p)
			}
		}
		n := (req.PromptTokens + blockSize - 1) / blockSize
		first := int(s.blockIDs.Add(uint64(n))) - n
		ids := make([]int, n)
		for i := range ids {
			ids[i] = first + i
		}
		id := s.cfg.ID
		return &KVTransferParams{
			DoRemotePrefill: true, RemoteEngineID: &id, RemoteBlockIDs: ids,
			RemoteHost: &host, RemotePort: &port, TPSize: 1,
		}
	}
	return nil
}

// reachable reports whether the prefill worker kv names accepts a
// connection: the decode worker's stand-in for reading its KV.
func reachable(kv *KVTransferParams) bool {
	if kv.RemoteHost == nil || kv.RemotePort == nil || kv.RemoteEngineID == nil {
		return false
	}
	addr := net.JoinHostPort(*kv.RemoteHost, strconv.Itoa(*kv.RemotePort))
	c, err := net.DialTimeout("tcp", addr, sideChannelTimeout)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// failedTransfer counts a KV load that could not start.
func (e *Engine) failedTransfer(model string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.models[model]; ok {
		m.FailedTransfers++
	}
}
