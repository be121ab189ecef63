package redisstore

import (
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/internal/options"
	"github.com/sleeplock/sleeplock/store"
)

// Defaults of the options.
const (
	// DefaultPrefix starts every key of the store unless WithPrefix names
	// another.
	DefaultPrefix = "sleeplock:"
	// DefaultWaiterTTL is the lease of a node's places in the queues: the
	// waiters of a node that dies or pauses stop blocking others after it.
	DefaultWaiterTTL = time.Second
)

// Option configures New and Open.
type Option func(*config)

type config struct {
	prefix    string
	waiterTTL time.Duration
	unsafe    bool
	options.Errs
}

// configure applies opts to the defaults.
func configure(opts []Option) (config, error) {
	c := config{prefix: DefaultPrefix, waiterTTL: DefaultWaiterTTL}
	err := options.Apply(&c, &c.Errs, opts)
	return c, err
}

// WithPrefix sets the start of every key of the store (default
// "sleeplock:"): stores with other prefixes share nothing, as pgstore's
// schemas. It must be 1 to 100 bytes, without "{" or "}" (the keys' hash
// tags follow it) and without control characters.
func WithPrefix(p string) Option {
	return func(c *config) {
		if len(p) == 0 || len(p) > 100 || strings.ContainsAny(p, "{}") || strings.IndexFunc(p, isControl) >= 0 {
			c.Fail(store.Invalid(store.ErrInvalidConfig, "prefix "+quote(p),
				"must be 1 to 100 bytes without braces or control characters"))
			return
		}
		c.prefix = p
	}
}

// WithWaiterTTL sets how long the waiters of a node keep their places in
// the queues without a heartbeat of their node (default 1s, at least
// 100ms; the node beats four times in it). A waiter whose process dies
// leaves the queue within it.
func WithWaiterTTL(d time.Duration) Option {
	return func(c *config) {
		if err := options.AtLeast("a waiter TTL", d, 100*time.Millisecond); err != nil {
			c.Fail(err)
			return
		}
		c.waiterTTL = d
	}
}

// WithoutSafetyChecks makes Open accept a server whose settings break
// locks (see Open): an eviction policy other than noeviction, or a
// replica. For tests and for servers whose CONFIG command is renamed.
func WithoutSafetyChecks() Option { return func(c *config) { c.unsafe = true } }

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
