package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/llm-router/llm-router/envoy"
	"github.com/llm-router/llm-router/internal/app"
	"github.com/llm-router/llm-router/internal/cli"
	"github.com/llm-router/llm-router/internal/config"
)

const usage = `usage: llm-router <command> [flags]

commands:
  serve --config FILE          run the ext_proc scheduling sidecar
  envoy-config --config FILE   print the Envoy configuration for FILE
  workers [--model M]          list workers with their live state
  stats                        the fleet at a glance, with queues
  register --id ID --address HOST:PORT --model M [--lease 10s] [--keep-alive]
                               add a worker (--keep-alive: stay and heartbeat, an agent)
  deregister ID                remove a worker now
  drain ID [--wait] [--timeout 5m]
                               no new requests; --wait returns once none is in flight
  undrain ID                   take requests again
  explain REQUEST_ID           print the decision for a request
  smoke --url URL [--model M] [--api-key K] [--admin URL]
                               check a running stack as a client sees it
  version                      print the version and the pinned Envoy version

Commands that talk to a running router take --admin URL (default
$LLM_ROUTER_ADMIN or http://127.0.0.1:9090), -o table|json, and for changes
--token (default $LLM_ROUTER_ADMIN_TOKEN), the router's admin.token.
`

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "envoy-config":
		return envoyConfig(args[1:], stdout, stderr)
	case "explain":
		return explain(ctx, args[1:], stdout, stderr)
	case "workers":
		return workers(ctx, args[1:], stdout, stderr)
	case "stats":
		return stats(ctx, args[1:], stdout, stderr)
	case "register":
		return register(ctx, args[1:], stdout, stderr)
	case "deregister":
		return deregister(ctx, args[1:], stdout, stderr)
	case "drain":
		return drain(ctx, args[1:], stdout, stderr, true)
	case "undrain":
		return drain(ctx, args[1:], stdout, stderr, false)
	case "smoke":
		return smoke(ctx, args[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "llm-router (Envoy %s)\n", envoy.Version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// parseConfigFlag parses `--config FILE` for a subcommand.
func parseConfigFlag(name string, args []string, stderr io.Writer) (config.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "router config file (YAML)")
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, fmt.Errorf("%s: unexpected arguments %s", name, strings.Join(fs.Args(), " "))
	}
	if *path == "" {
		return config.Config{}, fmt.Errorf("%s: --config FILE is required", name)
	}
	return config.Load(*path, nil)
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseConfigFlag("serve", args, stderr)
	if err != nil {
		return err
	}
	return app.Run(ctx, cfg)
}

func envoyConfig(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfigFlag("envoy-config", args, stderr)
	if err != nil {
		return err
	}
	out, err := envoy.Render(cfg)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// adminFlags are the flags of every command that talks to a router.
type adminFlags struct {
	admin, token, output string
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	def := os.Getenv("LLM_ROUTER_ADMIN")
	if def == "" {
		def = "http://127.0.0.1:9090"
	}
	fs.StringVar(&a.admin, "admin", def, "the router's admin URL")
	fs.StringVar(&a.token, "token", os.Getenv("LLM_ROUTER_ADMIN_TOKEN"), "admin credential (or LLM_ROUTER_ADMIN_TOKEN)")
	fs.StringVar(&a.output, "o", "table", "output: table or json")
}

func (a *adminFlags) client() (*cli.Client, error) {
	if a.output != "table" && a.output != "json" {
		return nil, fmt.Errorf("-o %q: want table or json", a.output)
	}
	if !strings.HasPrefix(a.admin, "http://") && !strings.HasPrefix(a.admin, "https://") {
		a.admin = "http://" + a.admin
	}
	return &cli.Client{Base: a.admin, Token: a.token}, nil
}

// parseWithPositional parses flags that may come before or after the
// positional arguments (explain ID --admin URL, as operators type it).
func parseWithPositional(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func explain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a adminFlags
	a.register(fs)
	pos, err := parseWithPositional(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: llm-router explain REQUEST_ID [--admin URL] [-o json]")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	d, err := c.Explain(ctx, pos[0])
	if err != nil {
		return err
	}
	if a.output == "json" {
		return cli.PrintJSON(stdout, d)
	}
	cli.PrintDecision(stdout, d)
	return nil
}

func smoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o cli.SmokeOptions
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "the Envoy listener clients use")
	fs.StringVar(&o.Model, "model", "", "model to ask for (default: the first /v1/models lists)")
	fs.StringVar(&o.APIKey, "api-key", os.Getenv("LLM_ROUTER_API_KEY"), "API key, when the router checks keys (default $LLM_ROUTER_API_KEY)")
	fs.StringVar(&o.Admin, "admin", "", "a router admin URL: also check /health and explain a request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("smoke: unexpected arguments %s", strings.Join(fs.Args(), " "))
	}
	return cli.Smoke(ctx, o, stdout)
}
