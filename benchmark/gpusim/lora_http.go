package gpusim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"
)

// servedModels are the names a request's model may take: the models, then
// the registered adapters.
func (s *Server) servedModels() []string {
	out := s.cfg.Models
	if s.cfg.MaxLoras > 0 {
		out = append([]string(nil), out...)
		for _, a := range s.eng.Adapters() {
			out = append(out, a.Name)
		}
	}
	return out
}

// loadAdapter is vLLM's POST /v1/load_lora_adapter {lora_name, lora_path}:
// 200 with a plain-text success line, or an error body.
func (s *Server) loadAdapter(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"lora_name"`
		Path string `json:"lora_path"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		writeLoRAError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	if err := s.eng.LoadAdapter(in.Name, in.Path); err != nil {
		writeLoRAError(w, err)
		return
	}
	s.log.Info("lora adapter loaded", zap.String("lora_name", in.Name), zap.String("lora_path", in.Path))
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", in.Name))
}

// unloadAdapter is vLLM's POST /v1/unload_lora_adapter {lora_name}.
func (s *Server) unloadAdapter(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"lora_name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		writeLoRAError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	if err := s.eng.UnloadAdapter(in.Name); err != nil {
		writeLoRAError(w, err)
		return
	}
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", in.Name))
}

func writeText(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(msg))
}

// writeLoRAError answers as vLLM's create_error_response: vLLM's message,
// its error type and the status.
func writeLoRAError(w http.ResponseWriter, err error) {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	}
	status, typ := http.StatusBadRequest, "BadRequestError"
	switch {
	case errors.Is(err, ErrLoRANotFound):
		status, typ = http.StatusNotFound, "NotFoundError"
	case errors.Is(err, ErrLoRAExists), errors.Is(err, ErrBadRequest):
		typ = "InvalidUserInput"
	}
	msg := err.Error()
	if ae := (*AdapterError)(nil); errors.As(err, &ae) {
		msg = ae.Message
	}
	writeJSON(w, status, map[string]detail{"error": {Message: msg, Type: typ, Code: status}})
}
