package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrConfig is wrapped by every error about a setting's value.
var ErrConfig = errors.New("invalid configuration")

// Error is a bad setting: where it came from, which key, what was given
// and what was expected.
type Error struct {
	Source string // "configs/sidecar.yaml:12", "environment FZ_SINK", "flag --writers"
	Key    string
	Value  string // "" for secrets
	Msg    string
}

func (e *Error) Error() string {
	v := ""
	if e.Value != "" {
		v = fmt.Sprintf(" %q", e.Value)
	}
	return fmt.Sprintf("%s: %s%s: %s", e.Source, e.Key, v, e.Msg)
}

func (e *Error) Unwrap() error { return ErrConfig }

// Flags registers one flag per setting on fs. The returned function applies
// what the command line gave (call it after fs.Parse, last, so flags win).
// Flags are collected as strings and parsed by the same code as file and
// environment values.
func Flags(fs *flag.FlagSet) (file *string, apply func(*Settings) error) {
	def := Defaults()
	given := map[string]string{}
	var order []string
	for i := range table {
		e := &table[i]
		help := e.help + fmt.Sprintf(" [%s]", Env(e.key))
		if e.show != nil {
			if d := e.show(&def); d != "" {
				help += fmt.Sprintf(" (default %s)", d)
			}
		}
		fs.Func(e.flag, help, func(v string) error {
			if _, dup := given[e.key]; !dup {
				order = append(order, e.key)
			}
			given[e.key] = v
			return nil
		})
	}
	file = fs.String("config", "", "YAML configuration file (keys as in configs/sidecar.yaml) [FZ_CONFIG]")
	return file, func(s *Settings) error {
		for _, k := range order {
			e := lookup(k)
			if err := set(s, e, given[k], "flag --"+e.flag); err != nil {
				return err
			}
		}
		return nil
	}
}

func set(s *Settings, e *entry, v, source string) error {
	if err := e.parse(s, v); err != nil {
		shown := v
		if e.secret {
			shown = ""
		}
		return &Error{Source: source, Key: e.key, Value: shown, Msg: err.Error()}
	}
	if s.set == nil {
		s.set = map[string]string{}
	}
	s.set[e.key] = source
	return nil
}

// Load builds Settings from defaults, the file (if path is not empty), the
// environment (getenv, usually os.Getenv) and flags (apply from Flags, may
// be nil), then checks rules between settings.
func Load(path string, getenv func(string) string, flags func(*Settings) error) (Settings, error) {
	s := Defaults()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return s, fmt.Errorf("config file: %w", err)
		}
		if err := applyYAML(&s, path, b); err != nil {
			return s, err
		}
	}
	if getenv != nil {
		for i := range table {
			e := &table[i]
			if v := getenv(Env(e.key)); v != "" {
				if err := set(&s, e, v, "environment "+Env(e.key)); err != nil {
					return s, err
				}
			}
		}
	}
	if flags != nil {
		if err := flags(&s); err != nil {
			return s, err
		}
	}
	return s, s.check()
}

// check enforces rules that involve several settings.
func (s *Settings) check() error {
	if s.NATS.URL != "" && s.IsSet("nats.listen") {
		return &Error{Source: s.Source("nats.listen") + " and " + s.Source("nats.url"), Key: "nats.listen",
			Msg: "configures the embedded server; it cannot be combined with nats.url (an external server): set only one"}
	}
	if (s.NATS.TLSCert == "") != (s.NATS.TLSKey == "") {
		return &Error{Source: s.Source("nats.tls_cert"), Key: "nats.tls_cert", Msg: "expected nats.tls_cert and nats.tls_key together"}
	}
	if s.Replicas > 1 && s.NATS.URL == "" {
		return &Error{Source: s.Source("jetstream.replicas"), Key: "jetstream.replicas", Value: strconv.Itoa(s.Replicas),
			Msg: "needs a NATS cluster (nats.url); the embedded server is a single server: use 1"}
	}
	if s.S3.PartSize != 0 && s.S3.PartSize < 5<<20 {
		return &Error{Source: s.Source("s3.part_size"), Key: "s3.part_size", Value: formatSize(s.S3.PartSize), Msg: "expected at least 5MiB (the S3 minimum part size)"}
	}
	return nil
}

// applyYAML walks the document so that every error can name its line and
// key, unknown keys are refused (a typo must not silently keep a default),
// and scalars reach the same parsers as flags and the environment.
func applyYAML(s *Settings, path string, b []byte) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			return nil // empty file: all defaults
		}
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	return walk(s, path, "", root)
}

func walk(s *Settings, path, prefix string, n *yaml.Node) error {
	pos := func(n *yaml.Node) string { return path + ":" + strconv.Itoa(n.Line) }
	if n.Kind != yaml.MappingNode {
		where := "the top level"
		if prefix != "" {
			where = strings.TrimSuffix(prefix, ".")
		}
		return &Error{Source: pos(n), Key: where, Msg: "expected a mapping of keys to values"}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := prefix + k.Value
		if e := lookup(key); e != nil {
			switch {
			case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
				continue // "key:" with no value keeps the default
			case v.Kind == yaml.SequenceNode && key == "gpus":
				var parts []string
				for _, c := range v.Content {
					parts = append(parts, c.Value)
				}
				if err := set(s, e, strings.Join(parts, ","), pos(v)); err != nil {
					return err
				}
				continue
			case v.Kind != yaml.ScalarNode:
				return &Error{Source: pos(v), Key: key, Msg: "expected a single value, not a list or mapping"}
			}
			if err := set(s, e, v.Value, pos(v)); err != nil {
				return err
			}
			continue
		}
		if sub := children(key + "."); len(sub) > 0 {
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue
			}
			if err := walk(s, path, key+".", v); err != nil {
				return err
			}
			continue
		}
		return &Error{Source: pos(k), Key: key, Msg: "unknown key; expected one of " + strings.Join(children(prefix), ", ")}
	}
	return nil
}

// children lists the next path elements below prefix ("" for the top).
func children(prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range table {
		if rest, ok := strings.CutPrefix(e.key, prefix); ok {
			name, _, _ := strings.Cut(rest, ".")
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

func formatSize(n int64) string {
	switch {
	case n == 0:
		return ""
	case n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func formatGPUs(g []int) string {
	if len(g) == 1 && g[0] == -1 {
		return "all"
	}
	var p []string
	for _, d := range g {
		p = append(p, strconv.Itoa(d))
	}
	return strings.Join(p, ",")
}

// Set applies values by key (non-empty ones only), parsed as the file,
// environment and flags would be; source names them in errors.
func Set(s *Settings, values map[string]string, source string) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := lookup(k)
		if e == nil {
			return fmt.Errorf("config.Set: unknown key %q", k)
		}
		if values[k] == "" {
			continue
		}
		if err := set(s, e, values[k], source+" --"+e.flag); err != nil {
			return err
		}
	}
	return nil
}
