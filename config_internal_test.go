package sleeplock

import (
	"errors"
	"testing"
)

// A panic of the YAML reader stops at the boundary as a *ConfigError.
func TestConfigReaderPanicIsContained(t *testing.T) {
	c, err := contained("locks.yaml", func() (*Config, error) {
		var p *Config
		_ = p.Locks // a nil dereference, as a parser bug would panic
		return &Config{}, nil
	})
	var ce *ConfigError
	if c != nil || !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) || ce.File != "locks.yaml" || ce.Entry != -1 {
		t.Fatalf("contained = %v, %v", c, err)
	}
}
