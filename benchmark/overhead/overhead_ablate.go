package overhead

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/test/stack"
)

// ablation is the router's rendered Envoy config with one part taken out,
// to measure what that part costs a request. Measurement only: none of
// these configs keeps the product's guarantees (fail-open needs both
// filters; the response phase observes and releases).
type ablation struct {
	name string
	edit func(yaml string) (string, error)
}

var ablations = []ablation{
	{"router, no json_to_metadata filter", func(y string) (string, error) { return removeFilter(y, "envoy.filters.http.json_to_metadata") }},
	{"router, no fail-open Lua filter", func(y string) (string, error) { return removeFilter(y, "llm_router.fail_open") }},
	{"router, response headers not sent", func(y string) (string, error) {
		return replaceOnce(y, "response_header_mode: SEND", "response_header_mode: SKIP")
	}},
}

// startAblations starts one Envoy per ablation, all asking the router
// already running with cfg (admission off), whose pid is routerPid, and a
// second no-op ext_proc server with fixed 1 MiB gRPC windows (grpc-go's
// default starts at 64 KiB and grows them by BDP estimation): whether a
// 256 KB body waits for window updates.
func startAblations(ctx context.Context, st *overheadStack, envoyBin, binDir, dir string, cfg config.Config, routerPid int) error {
	noop, err := startNoop(ctx, envoyBin, binDir, dir, cfg, configNoop+", 1 MiB gRPC windows", "--window", strconv.Itoa(1<<20))
	if err != nil {
		return err
	}
	st.stops = append(st.stops, noop.stop)
	st.targets = append(st.targets, noop.target)
	for _, a := range ablations {
		c := cfg
		addrs := stack.MustFreeAddrs(2)
		c.Envoy.Listen, c.Envoy.Admin = addrs[0], addrs[1]
		y, err := envoy.Render(c)
		if err != nil {
			return err
		}
		edited, err := a.edit(string(y))
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		ev, err := stack.StartEnvoy(ctx, envoyBin, dir, []byte(edited), c.Envoy.Admin, c.Envoy.Listen)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		st.stops = append(st.stops, func() { ev.Stop(3 * time.Second) })
		st.targets = append(st.targets, overheadTarget{
			name: a.name, url: "http://" + c.Envoy.Listen,
			pids: map[string]int{"envoy": ev.Pid(), "llm-router": routerPid}, extproc: "llm-router",
		})
	}
	return nil
}

// removeFilter deletes the http_filters entry named name: its "- name:"
// line and every following line indented deeper than it.
func removeFilter(yaml, name string) (string, error) {
	lines := strings.Split(yaml, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "- name: "+name {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		j := i + 1
		for j < len(lines) {
			t := strings.TrimLeft(lines[j], " ")
			if t != "" && len(lines[j])-len(t) <= indent {
				break
			}
			j++
		}
		return strings.Join(append(lines[:i:i], lines[j:]...), "\n"), nil
	}
	return "", fmt.Errorf("no filter %s in the rendered config", name)
}

func replaceOnce(s, old, repl string) (string, error) {
	if strings.Count(s, old) != 1 {
		return "", fmt.Errorf("want one %q in the rendered config, found %d", old, strings.Count(s, old))
	}
	return strings.Replace(s, old, repl, 1), nil
}
