package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Build compiles the named commands (e.g. "llm-router", "gpusim") from
// ./cmd into dir and returns their paths by name.
func Build(dir string, names ...string) (map[string]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
		out[n] = filepath.Join(dir, n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(names, " "), err, b)
	}
	return out, nil
}

// Gpusim is a running simulated GPU worker.
type Gpusim struct {
	*Proc
	Addr string
}

// StartGpusim starts one gpusim on a free port (unless args has --listen)
// and waits for its /health.
func StartGpusim(ctx context.Context, bin string, args ...string) (*Gpusim, error) {
	addr := ""
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			addr = args[i+1]
		}
	}
	if addr == "" {
		var err error
		if addr, err = FreeAddr(); err != nil {
			return nil, err
		}
		args = append([]string{"--listen", addr}, args...)
	}
	p, err := Start("gpusim "+addr, bin, args, nil)
	if err != nil {
		return nil, err
	}
	g := &Gpusim{Proc: p, Addr: addr}
	if err := WaitTCP(ctx, addr, 10*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("gpusim %s: %w\n%s", addr, err, p.Log())
	}
	return g, nil
}

// Router is a router process.
type Router struct {
	*Proc
	AdminAddr   string
	ExtProcAddr string
}

// StartRouter runs `llm-router serve --config path` and waits for /health.
func StartRouter(ctx context.Context, bin, configPath, adminAddr, extprocAddr string, env ...string) (*Router, error) {
	p, err := StartEnv("llm-router", bin, []string{"serve", "--config", configPath}, env, nil)
	if err != nil {
		return nil, err
	}
	r := &Router{Proc: p, AdminAddr: adminAddr, ExtProcAddr: extprocAddr}
	err = WaitFor(ctx, 15*time.Second, func() error {
		if p.Exited() {
			return Permanent(fmt.Errorf("router exited:\n%s", tail(p.Log(), 3000)))
		}
		return WaitHTTP(ctx, "http://"+adminAddr+"/health", 200, 50*time.Millisecond)
	})
	if err != nil {
		p.Stop(2 * time.Second)
		return nil, err
	}
	return r, nil
}

// RedisBinary finds redis-server: $REDIS_SERVER, then PATH, then
// /usr/bin/redis-server (Debian's package).
func RedisBinary() (string, error) {
	return findBinary("redis-server", "REDIS_SERVER")
}

// findBinary finds name: $env, then PATH, then /usr/bin/name (where
// Debian's packages put it).
func findBinary(name, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/" + name); err == nil {
		return "/usr/bin/" + name, nil
	}
	return "", fmt.Errorf("no %s: run `make redis` (apt-get install -y %s) or set %s", name, name, env)
}

// Redis is a running redis-server.
type Redis struct {
	*Proc
	Addr string
	bin  string
	dir  string
}

// StartRedis starts a throwaway redis-server on addr (a free port when
// empty), without persistence, and waits for it.
func StartRedis(ctx context.Context, dir, addr string) (*Redis, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	if addr == "" {
		if addr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	host, port, _ := net.SplitHostPort(addr)
	p, err := Start("redis "+addr, bin, []string{
		"--bind", host, "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning",
	}, nil)
	if err != nil {
		return nil, err
	}
	r := &Redis{Proc: p, Addr: addr, bin: bin, dir: dir}
	if err := WaitTCP(ctx, addr, 10*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("redis %s: %w\n%s", addr, err, p.Log())
	}
	return r, nil
}

// Restart starts a fresh redis-server on the same address (after a kill).
func (r *Redis) Restart(ctx context.Context) (*Redis, error) {
	return StartRedis(ctx, r.dir, r.Addr)
}
