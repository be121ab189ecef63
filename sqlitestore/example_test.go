package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// Two slots of "builds", shared by every process that opens the same file.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sleeplock")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlitestore.Open(ctx, filepath.Join(dir, "locks.db"))
	if err != nil {
		log.Fatal(err)
	}
	locks := sleeplock.New(s) // closes s
	defer locks.Close()

	if err := locks.Define(ctx, "builds", 2); err != nil {
		log.Fatal(err)
	}
	lease, err := locks.Acquire(ctx, "builds", sleeplock.Kind("build"))
	if err != nil {
		log.Fatal(err)
	}
	st, _ := locks.State(ctx, "builds")
	fmt.Printf("slots %d, running %d\n", st.Slots, st.Running)
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: slots 2, running 1
}
