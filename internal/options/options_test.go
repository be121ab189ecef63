package options_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/internal/options"
	"github.com/sleeplock/sleeplock/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type config struct {
	poll time.Duration
	options.Errs
}

type option func(*config)

func poll(d time.Duration) option {
	return func(c *config) {
		c.Fail(options.Positive("a poll interval", d))
		c.poll = d
	}
}

func TestApplyKeepsTheFirstError(t *testing.T) {
	var c config
	err := options.Apply(&c, &c.Errs, []option{poll(time.Second), poll(-time.Second), poll(0)})
	if !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), "-1s") || !strings.Contains(err.Error(), "a poll interval must be positive") {
		t.Fatalf("Apply = %v, want the first bad value (-1s) named as an invalid config", err)
	}
}

func TestApplyRefusesANilOption(t *testing.T) {
	var c config
	err := options.Apply(&c, &c.Errs, []option{poll(time.Second), nil})
	if !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), "option 2 of 2 is nil") {
		t.Fatalf("Apply with a nil option = %v, want an invalid config naming option 2", err)
	}
}

func TestApplyGood(t *testing.T) {
	var c config
	if err := options.Apply(&c, &c.Errs, []option{poll(time.Second), poll(2 * time.Second)}); err != nil || c.poll != 2*time.Second {
		t.Fatalf("Apply = %v, poll %v; want nil, 2s", err, c.poll)
	}
}

func TestAtLeast(t *testing.T) {
	if err := options.AtLeast("a waiter TTL", 99*time.Millisecond, 100*time.Millisecond); !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least 100ms") {
		t.Fatalf("AtLeast(99ms, 100ms) = %v", err)
	}
	if err := options.AtLeast("a waiter TTL", 100*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatalf("AtLeast(100ms, 100ms) = %v", err)
	}
}
