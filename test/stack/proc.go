// Package stack starts the real components of a local llm-router stack as
// child processes, on free loopback ports: Envoy, Redis, Prometheus, gpusim
// workers and router replicas. Tests, the demo, the benchmark and the chaos
// suite all use it, so they exercise the same real parts a user runs.
//
// Every process is stopped by Stop (SIGTERM, then SIGKILL after a grace
// period); callers register Stop in their cleanup.
package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a started child process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	err  error
}

// Start runs bin with args; its stdout and stderr go to an in-memory log
// (and to extra, when not nil).
func Start(name, bin string, args []string, extra io.Writer) (*Proc, error) {
	return StartEnv(name, bin, args, nil, extra)
}

// StartEnv is Start with extra environment variables (KEY=VALUE).
func StartEnv(name, bin string, args, env []string, extra io.Writer) (*Proc, error) {
	p := &Proc{Name: name, log: &syncBuffer{}, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var out io.Writer = p.log
	if extra != nil {
		out = io.MultiWriter(p.log, extra)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Log returns everything the process printed so far.
func (p *Proc) Log() string { return p.log.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, waits up to grace, then kills.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Wait waits for the process to exit and returns its error.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Keep the last 4 MiB: enough to diagnose, bounded for long runs.
	if b.buf.Len() > 8<<20 {
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-4<<20:]...)
		b.buf.Reset()
		b.buf.Write(tail)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago.
func FreeAddr() (string, error) {
	ln, err := listenFree()
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// MustFreeAddrs returns n distinct free loopback addresses or panics; for
// test setup.
func MustFreeAddrs(n int) []string {
	out := make([]string, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := listenFree()
		if err != nil {
			panic(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out
}

// listenFree listens on a free loopback port below the kernel's ephemeral
// range, never one this process handed out before. Port 0 would hand out
// a port from the ephemeral range, which the kernel also gives to outgoing
// connections as their source port: between our closing the probe and a
// child process binding it, a client connection of a busy benchmark can
// take it ("Address already in use", seen in a `make bench` run). And a
// random port is free when probed but may be one handed out a moment ago
// and not bound yet (seen too): hence the record of every port given.
// Falls back to port 0 when no port there is free.
func listenFree() (net.Listener, error) {
	lo := ephemeralLow()
	const base = 10000
	if lo > base+1000 {
		for range 100 {
			port := base + rand.IntN(lo-base)
			if !handOut(port) {
				continue
			}
			if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				return ln, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut records port as given and says whether it was new.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// ephemeralLow is the lowest port of the kernel's ephemeral range (Linux;
// 32768, its default, elsewhere or when unreadable).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// Permanent marks an error that WaitFor must not wait out (the process it
// waits for has exited).
func Permanent(err error) error { return permanentError{err} }

// WaitFor polls check every 20 ms until it returns nil, a Permanent error,
// or the deadline passes; the last error is returned.
func WaitFor(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		var perm permanentError
		if errors.As(last, &perm) {
			return perm.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s: %w", timeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitHTTP waits until GET url answers with status want.
func WaitHTTP(ctx context.Context, url string, want int, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	return WaitFor(ctx, timeout, func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("GET %s: status %d, want %d", url, resp.StatusCode, want)
		}
		return nil
	})
}

// WaitTCP waits until addr accepts TCP connections.
func WaitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func() error {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// RepoRoot walks up from the working directory to the directory holding
// go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
