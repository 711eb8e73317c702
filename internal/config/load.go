package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// Load reads the file at path, applies env overrides from getenv (os.Getenv
// when nil), fills defaults and validates.
func Load(path string, getenv func(string) string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return Parse(raw, getenv)
}

// Parse is Load on bytes already read.
func Parse(raw []byte, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := Default()
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %s", yamlMessage(err, raw))
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return Config{}, err
	}
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// yamlMessage rewrites yaml.v3's errors so each names the key the operator
// wrote: "line 3: field listn not found in type config.Envoy" becomes
// "envoy.listn (line 3): unknown key listn".
func yamlMessage(err error, raw []byte) string {
	paths := map[string]string{}
	var root yaml.Node
	if yaml.Unmarshal(raw, &root) == nil {
		collectPaths(&root, "", paths)
	}
	msg := unknownRe.ReplaceAllString(err.Error(), "unknown key $1")
	return lineRe.ReplaceAllStringFunc(msg, func(m string) string {
		line := lineRe.FindStringSubmatch(m)[1]
		if p, ok := paths[line]; ok {
			return p + " (line " + line + "): "
		}
		return m
	})
}

// collectPaths maps each line that holds a key or list item to its dotted
// path.
func collectPaths(n *yaml.Node, prefix string, out map[string]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			collectPaths(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if prefix != "" {
				p = prefix + "." + k.Value
			}
			out[fmt.Sprint(k.Line)] = p
			if v.Line != k.Line || v.Kind == yaml.ScalarNode {
				if _, taken := out[fmt.Sprint(v.Line)]; !taken {
					out[fmt.Sprint(v.Line)] = p
				}
			}
			collectPaths(v, p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			if _, taken := out[fmt.Sprint(c.Line)]; !taken {
				out[fmt.Sprint(c.Line)] = p
			}
			collectPaths(c, p, out)
		}
	}
}

func (c *Config) fill() {
	if len(c.Envoy.ExtProcAddrs) == 0 {
		c.Envoy.ExtProcAddrs = []string{c.ExtProcListen}
	}
	if c.ReplicaID == "" {
		host, _ := os.Hostname()
		c.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
}
