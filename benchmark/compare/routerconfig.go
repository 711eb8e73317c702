package compare

import (
	"fmt"
	"strings"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/internal/config"
)

// RouterConfig is the config every router replica of setup s runs with in
// a comparison at timeScale, as fleet.Env.Start builds it: the product's
// defaults, the setup's strategy and settings, then benchRouterConfig's
// adjustments, whose periods are in wall time (GPU time × timeScale).
// Workers and listen addresses are left out. The fleet simulator reads it
// to run the same setup in GPU time.
func RouterConfig(s fleet.Setup, timeScale float64) (config.Config, error) {
	c := config.Default()
	c.Strategy = s.Strategy
	for _, kv := range s.Settings {
		path, value, _ := strings.Cut(kv, "=")
		if err := config.Set(&c, path, value); err != nil {
			return c, fmt.Errorf("setup %s: %w", s.Name, err)
		}
	}
	benchRouterConfig(s, &c, timeScale)
	return c, nil
}
