package turns_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The behaviour of package turns is tested on every store by the
// cross-store tests of internal/integration/turns; here are its examples
// and its zero-value checks, on the memory store.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
