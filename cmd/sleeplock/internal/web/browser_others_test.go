package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// otherProcessEnv names the SQLite file through which the test binary,
// started again by a test, acts as another process (see otherProcess).
const otherProcessEnv = "SLEEPLOCK_WEB_TEST_OTHER_PROCESS"

// otherProcess is the second process of TestBrowserOtherProcess: on the
// SQLite file path, it acquires "gpu" as other-7 (kind render), printing
// "waiting" when it queues and "acquired" when granted, holds it until its
// standard input ends, then releases it and prints "released".
func otherProcess(path string) int {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	queued := make(notes, 16)
	locks := sleeplock.New(st, sleeplock.WithNotifier(queued))
	defer locks.Close()
	go func() {
		for e := range queued {
			if e.Type == sleeplock.EventWaiting {
				fmt.Println("waiting")
			}
		}
	}()
	l, err := locks.Acquire(ctx, "gpu", sleeplock.Ref("other-7"), sleeplock.Kind("render"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("acquired")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := l.Release(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("released")
	return 0
}

// TestBrowserOtherProcess: on SQLite, the page shows the wait, the grant
// and the release of another process (the test binary started again),
// which reach no notifier of the server's process: the grant within 1 s
// (the default poll, 500 ms, and the page's own work).
func TestBrowserOtherProcess(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	st, err := sqlitestore.Open(bg, path)
	must(t, err)
	e := newEnvOn(t, st, Config{Poll: DefaultPoll})
	must(t, e.locks.Define(bg, "gpu", 1))
	// This process, but another store on the file and no notifier: another
	// process as far as the server can tell.
	st2, err := sqlitestore.Open(bg, path)
	must(t, err)
	holder := sleeplock.New(st2)
	defer holder.Close()
	first, err := holder.Acquire(bg, "gpu", sleeplock.Ref("job-1"))
	must(t, err)

	must(t, chromedp.Do(ctx, chromedp.Navigate(e.http.URL)))
	gpu := `document.querySelector('.lock[data-name="gpu"]')`
	within(t, ctx, "the holder", `document.querySelector("#conn.on") && `+gpu+`?.querySelector(".cell.held .ref")?.textContent === "job-1"`)
	within(t, ctx, "the note on other processes", `!document.getElementById("feednote").hidden && document.getElementById("feednote").textContent.includes("every 500ms")`)

	other := exec.Command(os.Args[0], "-test.run=^$")
	other.Env = append(os.Environ(), otherProcessEnv+"="+path)
	other.Stderr = os.Stderr
	stdin, err := other.StdinPipe()
	must(t, err)
	stdout, err := other.StdoutPipe()
	must(t, err)
	must(t, other.Start())
	exited := make(chan error, 1)
	go func() { exited <- other.Wait() }()
	defer func() {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the other process: %v", err)
			}
		case <-time.After(10 * time.Second): // the test failed while it waited
			_ = other.Process.Kill()
			<-exited
		}
	}()
	lines := bufio.NewScanner(stdout)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("the other process said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	feedHas := func(words ...string) string {
		return `[...document.querySelectorAll("#feed li.polled")].some(li => ["` + strings.Join(words, `","`) + `"].every(w => li.textContent.includes(w)))`
	}

	expect("waiting")
	within(t, ctx, "the other process waiting", gpu+`.querySelector(".queue li .ref")?.textContent === "other-7" && `+feedHas("waiting", "other-7"))
	must(t, first.Release(bg))
	expect("acquired")
	granted := time.Now()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = chromedp.Run(sctx, chromedp.Poll[chromedp.Void](gpu+`.querySelector(".cell.held.k-render .ref")?.textContent === "other-7" && `+
		feedHas("acquired", "other-7", "waited"), chromedp.WithPollingMutation()))
	if err != nil {
		feed, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("feed").innerText`))
		t.Fatalf("the other process's grant not on the page within 1 s: %v\nfeed:\n%s", err, feed)
	}
	t.Logf("the other process's grant shown %v after it was granted", time.Since(granted))
	within(t, ctx, "its wait in the chart", `document.getElementById("waitstats").textContent.includes("last 1")`)
	within(t, ctx, "job-1's end", feedHas("released", "job-1"))

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(t.TempDir(), "others.png"), shot, 0o644))
	if p := os.Getenv("SLEEPLOCK_SCREENSHOT_OTHERS"); p != "" {
		must(t, os.WriteFile(p, shot, 0o644))
	}

	must(t, stdin.Close())
	expect("released")
	within(t, ctx, "the other process's release", feedHas("released", "other-7")+` && !`+gpu+`.querySelector(".cell.held")`)
}
