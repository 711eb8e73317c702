// Package auth checks client API keys and decides which priority a request
// may use. Keys are kept as SHA-256 digests and compared in constant time;
// neither keys nor Authorization headers are ever logged.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

// ErrUnauthenticated: no key, or a key the router does not know.
var ErrUnauthenticated = errors.New("missing or invalid API key")

// ErrBadPriority: an x-llm-priority value that is not a priority.
var ErrBadPriority = errors.New("x-llm-priority must be critical, standard or batch")

// Identity is who a key belongs to and the highest priority it may use.
type Identity struct {
	Tenant      string
	MaxPriority state.Priority
}

type entry struct {
	digest [sha256.Size]byte
	id     Identity
}

// Keys authenticates requests.
type Keys struct {
	entries []entry
	enabled bool
}

// Anonymous is the identity of requests when auth is off: they may lower
// their priority but never raise it above standard, so a header alone
// never buys priority.
var Anonymous = Identity{Tenant: "anonymous", MaxPriority: state.PriorityStandard}

// New loads the keys from the config, its keys file and AUTH_TOKEN.
func New(c config.Auth) (*Keys, error) {
	keys := append([]config.APIKey(nil), c.Keys...)
	if c.KeysFile != "" {
		raw, err := os.ReadFile(c.KeysFile)
		if err != nil {
			return nil, fmt.Errorf("auth.keys_file: %w", err)
		}
		var fromFile []config.APIKey
		if err := yaml.Unmarshal(raw, &fromFile); err != nil {
			return nil, fmt.Errorf("auth.keys_file %s: %w", c.KeysFile, err)
		}
		if len(fromFile) == 0 {
			// An empty keys file must not silently turn auth off.
			return nil, fmt.Errorf("auth.keys_file %s holds no keys", c.KeysFile)
		}
		for i, k := range fromFile {
			if len(k.Key) < 8 || k.Tenant == "" {
				return nil, fmt.Errorf("auth.keys_file %s: entry %d needs a key of 8+ characters and a tenant", c.KeysFile, i)
			}
			if !k.MaxPriority.OrStandard().Valid() {
				return nil, fmt.Errorf("auth.keys_file %s: entry %d: max_priority %q", c.KeysFile, i, k.MaxPriority)
			}
		}
		keys = append(keys, fromFile...)
	}
	if c.Token != "" {
		keys = append(keys, config.APIKey{Key: c.Token, Tenant: "default", MaxPriority: state.PriorityCritical})
	}
	k := &Keys{enabled: len(keys) > 0 && (c.Enabled == nil || *c.Enabled)}
	for _, key := range keys {
		k.entries = append(k.entries, entry{
			digest: sha256.Sum256([]byte(key.Key)),
			id:     Identity{Tenant: key.Tenant, MaxPriority: key.MaxPriority.OrStandard()},
		})
	}
	return k, nil
}

// Enabled reports whether requests must carry a key.
func (k *Keys) Enabled() bool { return k.enabled }

// Count is the number of keys loaded.
func (k *Keys) Count() int { return len(k.entries) }

// Authenticate checks an Authorization header value ("Bearer <key>").
// Every configured key is compared, in constant time, whatever matches.
func (k *Keys) Authenticate(authorization string) (Identity, error) {
	if !k.enabled {
		return Anonymous, nil
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Identity{}, ErrUnauthenticated
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := -1
	for i, e := range k.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrUnauthenticated
	}
	return k.entries[found].id, nil
}

// Priority resolves the priority of a request: the x-llm-priority header
// (empty: standard) lowered to the identity's maximum. A request may lower
// its own priority freely and raise it only as far as its key allows.
func Priority(header string, id Identity) (state.Priority, error) {
	want := state.Priority(strings.ToLower(strings.TrimSpace(header))).OrStandard()
	if !want.Valid() {
		return "", ErrBadPriority
	}
	if limit := id.MaxPriority.OrStandard(); want.Rank() < limit.Rank() {
		return limit, nil
	}
	return want, nil
}
