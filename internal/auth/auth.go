// Package auth checks client API keys: it loads them from the config and
// implements extproc.Authenticator, returning each key's tenant, the
// highest priority it may use and the tightest latency objectives it may
// ask for. Keys are kept as SHA-256 digests and
// compared in constant time; neither keys nor Authorization headers are
// ever logged.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-router/llm-router/extproc"
	"github.com/llm-router/llm-router/internal/config"
	"github.com/llm-router/llm-router/state"
)

type entry struct {
	digest [sha256.Size]byte
	id     extproc.Identity
}

// Keys authenticates requests.
type Keys struct {
	entries []entry
	enabled bool
}

var _ extproc.Authenticator = (*Keys)(nil)

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
			for _, id := range k.FairnessIDs {
				if !state.ValidTenant(id) {
					return nil, fmt.Errorf("auth.keys_file %s: entry %d: fairness id %q is not a tenant name", c.KeysFile, i, id)
				}
			}
			if err := config.KeyBoundError(k); err != nil {
				return nil, fmt.Errorf("auth.keys_file %s: entry %d: %w", c.KeysFile, i, err)
			}
		}
		keys = append(keys, fromFile...)
	}
	if c.Token != "" {
		// The operator's own key: the highest priority, and any objective
		// a header may name (1ms, the tightest).
		keys = append(keys, config.APIKey{
			Key: c.Token, Tenant: "default", MaxPriority: state.PriorityCritical,
			MinTTFTSLO: config.Duration(time.Millisecond), MinTPOTSLO: config.Duration(time.Millisecond),
		})
	}
	k := &Keys{enabled: len(keys) > 0 && (c.Enabled == nil || *c.Enabled)}
	for _, key := range keys {
		k.entries = append(k.entries, entry{
			digest: sha256.Sum256([]byte(key.Key)),
			id: extproc.Identity{
				Tenant: key.Tenant, MaxPriority: key.MaxPriority.OrStandard(),
				MinTTFT: key.MinTTFTSLO.D(), MinTPOT: key.MinTPOTSLO.D(),
				FairnessIDs: key.FairnessIDs,
			},
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
// With keys off every request is extproc.Anonymous.
func (k *Keys) Authenticate(authorization string) (extproc.Identity, error) {
	if !k.enabled {
		return extproc.Anonymous, nil
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return extproc.Identity{}, extproc.ErrUnauthenticated
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := -1
	for i, e := range k.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return extproc.Identity{}, extproc.ErrUnauthenticated
	}
	return k.entries[found].id, nil
}
