package sleeplock_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// charge stands for the scarce thing the tour's lock protects: a payment
// API that allows 3 calls at once.
func charge(_ context.Context, order string) (string, error) {
	return "receipt for " + order, nil
}

// Example_tour is the tour of README.md: the README shows this function's
// body, and TestReadmeGoIsExamples keeps the two the same.
func Example_tour() {
	// readme:begin
	ctx := context.Background()
	locks := sleeplock.New(nil) // the memory store: goroutines of one process
	defer locks.Close()

	// A lock with 3 slots: three holders at once. Defining it again is a no-op.
	if err := locks.Define(ctx, "payments", 3); err != nil {
		log.Fatal(err)
	}

	// Run a function holding a slot; it is released on return, error or panic.
	receipt, err := sleeplock.Execute(ctx, locks, "payments", func(ctx context.Context) (string, error) {
		return charge(ctx, "order-17")
	})
	fmt.Println(receipt, err)

	// Or manage slots yourself: Acquire waits in FIFO order, bounded by ctx.
	var leases []sleeplock.Lease
	for _, job := range []string{"job-1", "job-2", "job-3"} {
		lease, err := locks.Acquire(ctx, "payments", sleeplock.Ref(job), sleeplock.Kind("batch"))
		if err != nil {
			log.Fatal(err)
		}
		leases = append(leases, lease)
	}

	// TryAcquire never waits: with all 3 slots taken it is refused at once,
	// and says what holds the lock.
	_, err = locks.TryAcquire(ctx, "payments")
	var busy *sleeplock.BusyError
	if errors.As(err, &busy) {
		fmt.Printf("refused: %v (%s is held by a %s)\n", errors.Is(err, sleeplock.ErrUnavailable), busy.Lock, busy.Kind)
	}

	st, err := locks.State(ctx, "payments")
	fmt.Printf("slots %d, running %d, waiting %d, %v\n", st.Slots, st.Running, st.Waiting, err)

	// Release gives a slot back (ErrNotHeld when the lease was not held).
	for _, lease := range leases {
		fmt.Println(lease.Ref(), lease.Release(ctx))
	}
	// readme:end

	// Output:
	// receipt for order-17 <nil>
	// refused: true (payments is held by a batch)
	// slots 3, running 3, waiting 0, <nil>
	// job-1 <nil>
	// job-2 <nil>
	// job-3 <nil>
}

// Every Go block of README.md, and of the docs that README's detail moved
// to, runs as pasted: each is the text between "// readme:begin" and
// "// readme:end" in an Example of this repository (run and checked by go
// test in its module), one tab of indentation less. A block that is no
// example's fails here, with the examples' text.
func TestReadmeGoIsExamples(t *testing.T) {
	examples := readmeRegions(t)
	for _, f := range []string{"README.md", "docs/cli.md", "docs/election.md", "docs/library.md", "docs/stores.md", "docs/weights.md"} {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlocks(string(md))
		if f == "README.md" && len(blocks) == 0 {
			t.Fatal("README.md has no Go block: the test reads it wrong")
		}
		for _, b := range blocks {
			if !slices.Contains(examples, b.text) {
				t.Errorf("%s line %d: this Go block is no example's readme:begin/readme:end region (go test runs those):\n%s\nregions:\n%s",
					f, b.line, b.text, strings.Join(examples, "----\n"))
			}
		}
	}
}

// goBlock is one ```go block of a Markdown file and the line it starts on.
type goBlock struct {
	line int
	text string
}

func goBlocks(md string) []goBlock {
	var out []goBlock
	var cur *strings.Builder
	start := 0
	for i, line := range strings.SplitAfter(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur, start = &strings.Builder{}, i+1
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, goBlock{start, cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return out
}

// readmeRegions returns the readme:begin/readme:end regions of the
// repository's test files, one tab of indentation less.
func readmeRegions(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rest := string(src)
		for {
			_, body, ok := strings.Cut(rest, "\t// readme:begin\n")
			if !ok {
				break
			}
			body, after, ok := strings.Cut(body, "\t// readme:end\n")
			if !ok {
				return fmt.Errorf("%s: readme:begin without readme:end", path)
			}
			var b strings.Builder
			for _, line := range strings.SplitAfter(body, "\n") {
				b.WriteString(strings.TrimPrefix(line, "\t"))
			}
			out = append(out, b.String())
			rest = after
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
