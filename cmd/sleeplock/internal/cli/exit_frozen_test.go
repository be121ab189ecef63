//go:build unix

package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// TestExitWithStoreFrozen: when the store stops answering (a Redis of the
// test's own, frozen with SIGSTOP) while the command runs, run and elect
// still exit once it ends, with its status: the release (the resignation)
// on the way out gives up after releaseTimeout, and a warning names the
// lease left behind and says that it expires by its TTL.
func TestExitWithStoreFrozen(t *testing.T) {
	for _, verb := range []string{"run", "elect"} {
		t.Run(verb, func(t *testing.T) {
			srv := redistest.Start(t, 0)
			ts, child := newTerms(t)
			args := []string{verb, "--store", srv.URL(), "--ttl", "30s", "jobs", "--"}
			if verb == "run" {
				// run's command has no leader ID to report: give one.
				child = append([]string{"env", "SLEEPLOCK_LEADER_ID=run"}, child...)
			}
			e := startMain(t, ts, append(args, child...)...)
			cmd := ts.next(t, e)
			if err := srv.Freeze(); err != nil {
				t.Fatal(err)
			}
			ended := time.Now()
			cmd.exit(t, 3)
			code := ts.wait(t, e)
			took := time.Since(ended)
			t.Logf("%s exited %v after its command ended, the store frozen", verb, took)
			errOut := e.errOut.String()
			if code != 3 {
				t.Fatalf("%s: exit %d, stderr %q; want the command's 3", verb, code, errOut)
			}
			if want := "token " + strconv.FormatInt(cmd.token, 10); !strings.Contains(errOut, `could not release "jobs"`) ||
				!strings.Contains(errOut, want) || !strings.Contains(errOut, "expires by its TTL (30s)") {
				t.Fatalf("%s: stderr %q; want a warning naming the lease left behind (%s) and its TTL", verb, errOut, want)
			}
			// The bound is the scheduler's as much as ours: checked on
			// demand, on a machine that is not loaded.
			if os.Getenv("SLEEPLOCK_TEST_TIMING") != "" && took > releaseTimeout+time.Second {
				t.Errorf("%s exited %v after its command ended; want within %v", verb, took, releaseTimeout+time.Second)
			}
		})
	}
}
