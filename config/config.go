// Package config reads opsdesk's configuration: named contexts (which
// operation store to open, and how) and the tool catalog. It is the only
// package that imports viper.
//
// Precedence, highest first: flags, environment (OPSDESK_…), the config
// file ($OPSDESK_CONFIG, else $XDG_CONFIG_HOME/opsdesk/config.yaml), defaults.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/opsdesk/opsdesk/internal/lookupurl"
	"github.com/opsdesk/opsdesk/ops"
)

// EnvPrefix prefixes every environment variable opsdesk reads.
const EnvPrefix = "OPSDESK"

// Defaults of a context's settings.
const (
	DefaultRefresh    = 2 * time.Second
	DefaultStuckAfter = 0 * time.Second
	MinRefresh        = 250 * time.Millisecond
)

// Context is one operation store and how the console treats it.
type Context struct {
	// Name is the context's name in the file ("default" when none is
	// configured and the DSN comes from a flag or the environment).
	Name string `mapstructure:"-"`
	// DSN reaches the operation store. Empty means libpq's environment
	// (PGHOST, PGDATABASE, …) when UseLibpqEnv is set.
	DSN string `mapstructure:"dsn"`
	// ReadDSN, when set, serves the console's reads (a replica).
	ReadDSN string `mapstructure:"read_dsn"`
	// UseLibpqEnv allows an empty DSN, taking libpq's environment.
	UseLibpqEnv bool `mapstructure:"libpq_env"`
	// ReadOnly disables and hides every write.
	ReadOnly bool `mapstructure:"read_only"`
	// Refresh is the console's polling interval.
	Refresh time.Duration `mapstructure:"refresh"`
	// StuckAfter is how long past its lease expiry a pending record must
	// be before the console counts it as stuck (0: at once).
	StuckAfter time.Duration `mapstructure:"stuck_after"`
	// DisplayName is the name the operator gives in audit records, kept
	// apart from the database role the server authenticated.
	DisplayName string `mapstructure:"display_name"`
	// RevealKeys is an optional key file (ops.LoadKeyFile: mode 600, the
	// service's keys or the ones it still reads) with which the console's
	// and the CLI's reveals decrypt values sealed at rest. Without it, a
	// sealed value is shown as stored, with the key id it is under.
	RevealKeys string `mapstructure:"reveal_keys"`
	// Keyring is RevealKeys loaded; nil when it is not set.
	Keyring ops.Keyring `mapstructure:"-"`
}

// Tool is a tool's entry in the catalog.
type Tool struct {
	// Effect is local, external_idempotent or external_unknown. Effect,
	// Lease, Retention, AfterExpiry and RetryWindow are the service's:
	// ops.New records them in the store, and the console runs by the
	// recorded ones. The catalog may leave them out for such a tool (doctor
	// names a value that disagrees); a tool no service records keeps the
	// catalog's.
	Effect    string        `mapstructure:"effect"`
	Lease     time.Duration `mapstructure:"lease"`
	Retention time.Duration `mapstructure:"retention"`
	// AfterExpiry is what a retry gets once the record was purged:
	// reexecute (new work, the default) or reject (ops.ErrExpired).
	AfterExpiry string `mapstructure:"after_expiry"`
	// RetryWindow is the longest a caller may retry or recover an
	// operation: retention shorter than it is a risk, and a purge's
	// tombstone lasts it (default: the retention).
	RetryWindow time.Duration `mapstructure:"retry_window"`
	// Runbook is shown to the operator reconciling the tool's records.
	Runbook string `mapstructure:"runbook"`
	// Lookup asks the provider for an operation's outcome by key.
	Lookup *Lookup `mapstructure:"lookup"`
	// AutoReconcile names the lookup answers on which opsdesk reconciler
	// decides the tool's stuck records by itself: found (completed, with
	// the provider's reference), not_found (not executed), or both.
	// Default none. Only a tool with a lookup may have it, and the store's
	// allowlist (opsdesk reconciler allow, by an admin) must say the same:
	// the database refuses a reconciler what the allowlist does not let.
	AutoReconcile []string `mapstructure:"auto_reconcile"`
}

// AutoReconcileVerdicts are the lookup answers auto_reconcile may name.
var AutoReconcileVerdicts = []string{"found", "not_found"}

// Lookup is an HTTP outcome lookup (used by reconciliation): a GET whose
// status says whether the provider has the effect.
type Lookup struct {
	// URL is a template over {tenant}, {tool}, {key} (the caller's key)
	// and {provider_key} (the key ops.Identity.ProviderKey derives, for
	// services that send that to the provider), in its path or query only
	// (never its host or fragment); each is replaced by its
	// percent-encoded value.
	URL     string        `mapstructure:"url"`
	Timeout time.Duration `mapstructure:"timeout"`
	// FoundStatus and NotFoundStatus are the HTTP statuses of the two
	// definite answers (default 200 and 404; never a redirect); any other
	// is no answer.
	FoundStatus    int `mapstructure:"found_status"`
	NotFoundStatus int `mapstructure:"not_found_status"`
	// ResultRef is the JSON pointer (RFC 6901) of the provider's reference
	// in a found answer's body, such as /id.
	ResultRef string `mapstructure:"result_ref"`
}

// Config is the resolved configuration.
type Config struct {
	// File is the config file read; empty when there was none.
	File string
	// Context is the selected context with flags and environment applied.
	Context Context
	// Contexts lists the names of every context in the file.
	Contexts []string
	// Tools is the catalog by tool name.
	Tools map[string]Tool
}

// file is the config file's shape.
type file struct {
	CurrentContext string             `mapstructure:"current_context"`
	Contexts       map[string]Context `mapstructure:"contexts"`
	Tools          map[string]Tool    `mapstructure:"tools"`
}

// Options say where to look and what overrides the file.
type Options struct {
	// File overrides $OPSDESK_CONFIG and the default path.
	File string
	// Context selects a context, overriding $OPSDESK_CONTEXT and the
	// file's current_context.
	Context string
	// Flags may define dsn, read-dsn, libpq-env, read-only, refresh and
	// stuck-after; those the user set override everything else.
	Flags *pflag.FlagSet
}

// Error is a configuration error: the file (if any) and the key at fault.
type Error struct {
	File string
	Key  string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads and resolves the configuration.
func Load(opts Options) (*Config, error) {
	getenv := os.Getenv
	path, explicit := configPath(opts.File, getenv)

	var f file
	cfg := &Config{}
	if path != "" {
		if _, err := os.Stat(path); err == nil || explicit {
			cfg.File = path
			if err := readFile(path, &f); err != nil {
				return nil, err
			}
		}
	}
	for name := range f.Contexts {
		cfg.Contexts = append(cfg.Contexts, name)
	}
	slices.Sort(cfg.Contexts)

	name, err := selectContext(opts.Context, getenv(EnvPrefix+"_CONTEXT"), f, cfg.File)
	if err != nil {
		return nil, err
	}
	ctx, err := resolveContext(name, f.Contexts[name], opts.Flags, cfg.File)
	if err != nil {
		return nil, err
	}
	cfg.Context = ctx

	cfg.Tools = f.Tools
	if cfg.Tools == nil {
		cfg.Tools = map[string]Tool{}
	}
	for name, t := range cfg.Tools {
		if err := t.validate(); err != nil {
			return nil, &Error{File: cfg.File, Key: "tools." + name, Err: err}
		}
	}
	return cfg, nil
}

// configPath is --config, else $OPSDESK_CONFIG, else the XDG default;
// explicit says the user named it, so it must exist.
func configPath(flag string, getenv func(string) string) (path string, explicit bool) {
	if flag != "" {
		return flag, true
	}
	if p := getenv(EnvPrefix + "_CONFIG"); p != "" {
		return p, true
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "opsdesk", "config.yaml"), false
}

func readFile(path string, f *file) error {
	if err := checkNames(path); err != nil {
		return err
	}
	v := viper.New()
	v.SetConfigFile(path)
	if filepath.Ext(path) == "" {
		v.SetConfigType("yaml")
	}
	if err := v.ReadInConfig(); err != nil {
		return &Error{File: path, Err: err}
	}
	err := v.UnmarshalExact(f, viper.DecodeHook(durationHook))
	if err != nil {
		return &Error{File: path, Err: describeDecodeError(err)}
	}
	return nil
}

// describeDecodeError turns mapstructure's messages into ones that name
// the key to fix.
func describeDecodeError(err error) error {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "decoding failed due to the following error(s):\n\n", "")
	msg = strings.ReplaceAll(msg, "has invalid keys:", "has unknown keys:")
	msg = strings.ReplaceAll(msg, "'' has", "the top level has")
	return errors.New(strings.TrimSpace(msg))
}

func selectContext(flag, env string, f file, path string) (string, error) {
	name := flag
	if name == "" {
		name = env
	}
	if name == "" {
		name = f.CurrentContext
	}
	if name == "" {
		switch len(f.Contexts) {
		case 0:
			return "default", nil
		case 1:
			for only := range f.Contexts {
				return only, nil
			}
		default:
			return "", &Error{File: path, Key: "current_context",
				Err: errors.New("several contexts and none selected: pass --context NAME or set current_context")}
		}
	}
	if _, ok := f.Contexts[name]; !ok && len(f.Contexts) > 0 {
		known := make([]string, 0, len(f.Contexts))
		for k := range f.Contexts {
			known = append(known, k)
		}
		slices.Sort(known)
		return "", &Error{File: path, Key: "contexts",
			Err: fmt.Errorf("no context named %q (known: %s)", name, strings.Join(known, ", "))}
	}
	return name, nil
}

// contextKeys maps a context's settings to their flag names.
var contextKeys = map[string]string{
	"dsn":          "dsn",
	"read_dsn":     "read-dsn",
	"libpq_env":    "libpq-env",
	"read_only":    "read-only",
	"refresh":      "refresh",
	"stuck_after":  "stuck-after",
	"display_name": "display-name", // no flag: the file or OPSDESK_DISPLAY_NAME
	"reveal_keys":  "reveal-keys",  // no flag: the file or OPSDESK_REVEAL_KEYS
}

// resolveContext layers flags over environment over the file's entry over
// defaults, with viper's precedence.
func resolveContext(name string, fromFile Context, flags *pflag.FlagSet, path string) (Context, error) {
	v := viper.New()
	v.SetDefault("refresh", DefaultRefresh.String())
	v.SetDefault("stuck_after", DefaultStuckAfter.String())
	v.SetDefault("read_only", false)
	v.SetDefault("libpq_env", false)
	v.SetDefault("dsn", "")
	v.SetDefault("read_dsn", "")
	v.SetDefault("display_name", "")
	v.SetDefault("reveal_keys", "")
	if err := v.MergeConfigMap(map[string]any{
		"dsn": fromFile.DSN, "read_dsn": fromFile.ReadDSN, "libpq_env": fromFile.UseLibpqEnv,
		"read_only": fromFile.ReadOnly, "refresh": nonZero(fromFile.Refresh, DefaultRefresh).String(),
		"stuck_after": fromFile.StuckAfter.String(), "display_name": fromFile.DisplayName,
		"reveal_keys": fromFile.RevealKeys,
	}); err != nil {
		return Context{}, &Error{File: path, Err: err}
	}
	if err := checkEnv(); err != nil {
		return Context{}, err
	}
	v.SetEnvPrefix(EnvPrefix)
	for key, flag := range contextKeys {
		if err := v.BindEnv(key); err != nil { // OPSDESK_READ_ONLY for read_only
			return Context{}, err
		}
		if flags != nil {
			if f := flags.Lookup(flag); f != nil {
				if err := v.BindPFlag(key, f); err != nil {
					return Context{}, err
				}
			}
		}
	}
	var ctx Context
	if err := v.Unmarshal(&ctx, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		durationHook, mapstructure.StringToBasicTypeHookFunc()))); err != nil {
		return Context{}, &Error{File: path, Key: "contexts." + name, Err: describeDecodeError(err)}
	}
	ctx.Name = name
	if err := ctx.validate(path); err != nil {
		return Context{}, err
	}
	if ctx.RevealKeys != "" {
		kr, err := ops.LoadKeyFile(ctx.RevealKeys) // its errors name the file
		if err != nil {
			return Context{}, &Error{File: path, Key: "contexts." + name + ".reveal_keys", Err: err}
		}
		ctx.Keyring = kr
	}
	return ctx, nil
}

// checkEnv checks the context settings given in the environment, so that a
// bad value is blamed on its variable rather than on the config file.
func checkEnv() error {
	for key := range contextKeys {
		name := EnvPrefix + "_" + strings.ToUpper(key)
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			continue
		}
		var err error
		switch key {
		case "refresh", "stuck_after":
			_, err = time.ParseDuration(v)
			if err != nil {
				err = fmt.Errorf("%q is not a duration (write it like 500ms, 2s or 1m30s)", v)
			}
		case "read_only", "libpq_env":
			_, err = strconv.ParseBool(v)
			if err != nil {
				err = fmt.Errorf("%q is not true or false", v)
			}
		}
		if err != nil {
			return &Error{Key: name, Err: err}
		}
	}
	return nil
}

// checkNames refuses context and tool names that viper would change:
// it folds keys to lower case and splits them on dots.
func checkNames(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Err: err}
	}
	var names struct {
		Contexts map[string]any `yaml:"contexts"`
		Tools    map[string]any `yaml:"tools"`
	}
	if err := yaml.Unmarshal(raw, &names); err != nil {
		return nil // viper reports the syntax error with its position
	}
	for section, m := range map[string]map[string]any{"contexts": names.Contexts, "tools": names.Tools} {
		for name := range m {
			if name != strings.ToLower(name) || strings.Contains(name, ".") {
				return &Error{File: path, Key: section + "." + name,
					Err: errors.New("names must be lower case and contain no dots")}
			}
		}
	}
	return nil
}

// durationHook decodes durations written as strings ("2s", "1m30s") with
// an error that shows the value and the expected form.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		// A bare number would be nanoseconds: 30 would mean 30ns.
		return nil, fmt.Errorf("%v has no unit (write it like 30s, 5m or 168h)", data)
	default:
		return data, nil
	}
	d, err := time.ParseDuration(data.(string))
	if err != nil {
		return nil, fmt.Errorf("%q is not a duration (write it like 500ms, 2s or 1m30s)", data)
	}
	return d, nil
}

// FormatDuration writes d exactly, as the catalog reads it and people
// write it: 168h rather than 168h0m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func nonZero(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (c Context) validate(path string) error {
	fail := func(key string, err error) error {
		return &Error{File: path, Key: "contexts." + c.Name + "." + key, Err: err}
	}
	if c.DSN == "" && !c.UseLibpqEnv {
		return fail("dsn", errors.New("no DSN: set dsn in the context, OPSDESK_DSN, or --dsn "+
			"(or libpq_env: true to use PGHOST, PGDATABASE, …)"))
	}
	if c.Refresh < MinRefresh {
		return fail("refresh", fmt.Errorf("%v is below the minimum of %v", c.Refresh, MinRefresh))
	}
	if c.StuckAfter < 0 {
		return fail("stuck_after", fmt.Errorf("%v is negative", c.StuckAfter))
	}
	return nil
}

func (t Tool) validate() error {
	switch ops.Effect(t.Effect) {
	case "", ops.EffectLocal, ops.EffectIdempotentProvider, ops.EffectUnknownOutcome:
	default:
		return fmt.Errorf("effect %q is not one of %s, %s, %s", t.Effect,
			ops.EffectLocal, ops.EffectIdempotentProvider, ops.EffectUnknownOutcome)
	}
	if t.Lease < 0 || t.Retention < 0 || t.RetryWindow < 0 {
		return errors.New("lease, retention and retry_window must not be negative")
	}
	switch t.AfterExpiry {
	case "", "reexecute", "reject":
	default:
		return fmt.Errorf("after_expiry %q is not one of reexecute, reject", t.AfterExpiry)
	}
	for i, v := range t.AutoReconcile {
		if !slices.Contains(AutoReconcileVerdicts, v) {
			return fmt.Errorf("auto_reconcile names %q: a reconciler decides on found, not_found or both "+
				"(write auto_reconcile: [found, not_found], or [found]; a lookup's other answers are for people)", v)
		}
		if slices.Contains(t.AutoReconcile[:i], v) {
			return fmt.Errorf("auto_reconcile names %q twice", v)
		}
	}
	if len(t.AutoReconcile) > 0 && t.Lookup == nil {
		return errors.New("auto_reconcile needs a lookup: a reconciler decides only what the provider's answer settles; " +
			"add a lookup (url, result_ref) to the tool, or remove auto_reconcile")
	}
	if t.Lookup != nil {
		return t.Lookup.validate()
	}
	return nil
}

func (l Lookup) validate() error {
	found, notFound := cmpOr(l.FoundStatus, 200), cmpOr(l.NotFoundStatus, 404)
	if l.URL == "" {
		return errors.New("lookup.url is required when lookup is set")
	}
	if _, err := lookupurl.Parse(l.URL); err != nil {
		return fmt.Errorf("lookup.url %q: %w", l.URL, err)
	}
	switch {
	case l.Timeout < 0:
		return errors.New("lookup.timeout must not be negative")
	case !definite(found), !definite(notFound):
		// A redirect is never followed, so it cannot be an answer.
		return errors.New("lookup.found_status and lookup.not_found_status must be HTTP statuses from 200 to 599, " +
			"not redirects (3xx): a lookup never follows one")
	case found == notFound:
		return fmt.Errorf("lookup.found_status and lookup.not_found_status are both %d: found could not be told from not found", found)
	case l.ResultRef != "" && !strings.HasPrefix(l.ResultRef, "/"):
		return fmt.Errorf("lookup.result_ref %q is not a JSON pointer (it starts with /, such as /id)", l.ResultRef)
	}
	return nil
}

// definite tells whether an HTTP status can be a lookup's definite answer.
func definite(status int) bool {
	return status >= 200 && status <= 599 && (status < 300 || status >= 400)
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
