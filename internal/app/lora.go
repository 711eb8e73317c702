package app

import (
	"net/http"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/internal/lora"
	"github.com/llm-router/llm-router/scheduler"
)

// adapterOptions are the scheduler's LoRA settings: with lora.manage, a
// loader calling the engines' adapter API.
func adapterOptions(c config.LoRA) scheduler.AdapterOptions {
	o := scheduler.AdapterOptions{LoadTime: c.LoadTime.D(), LoadTimeout: c.LoadTimeout.D(), Catalog: c.Catalog()}
	if c.Manage {
		o.Loader = &lora.Loader{Client: &http.Client{}}
	}
	return o
}
