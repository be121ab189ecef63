package labels

import "time"

// Config is what the options of both adapters set alike: the mapper and
// the label limit of their Set, the bound of one read of the store, and
// the elections they report.
type Config struct {
	Mapper    func(string) string // nil: Family
	MaxLabels int                 // ≤ 0: 1000
	Timeout   time.Duration
	Elections []string
}

// DefaultConfig is the Config of an adapter given no option.
func DefaultConfig() Config { return Config{Timeout: 5 * time.Second} }

// SetMapper sets the mapper; a nil f keeps the one set before.
func (c *Config) SetMapper(f func(string) string) {
	if f != nil {
		c.Mapper = f
	}
}
