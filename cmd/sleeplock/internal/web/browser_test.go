package web

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sleeplock/sleeplock"
)

// chromium returns the path of a Chromium (Debian's package "chromium").
// Where none is installed the test is skipped with one loud line, except
// under CI, where it fails: .ci/run installs Chromium.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium not found: CI must install it (apt-get install -y chromium)")
	}
	t.Skip("SKIPPING THE BROWSER TEST: Chromium not found (apt-get install -y chromium)")
	return ""
}

// browser starts a headless Chromium for the test and returns its tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// Start the browser now: the first Run allocates it, and cancelling a
	// context that never ran would wait for a browser that never came.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
	})
	return ctx
}

// within bounds one step: the page must show a change within a few
// seconds (10: a deadline for a failure on a loaded machine, not a
// measure; each step logs how long it took).
func within(t *testing.T, ctx context.Context, what, predicate string) time.Duration {
	t.Helper()
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingMutation())); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("count").textContent + " " + document.querySelectorAll(".lock").length + "\n" + document.getElementById("locks").innerText.slice(0, 300)`))
		t.Fatalf("the page did not show %s: %v\npage:\n%s", what, err, html)
	}
	return time.Since(start)
}

// TestBrowser: in headless Chromium, the page shows a holder and a queue
// as they happen, without a reload, and clears when they release through
// the API.
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	e := newEnv(t, Config{AllowRelease: true, Token: testToken})
	scene(t, e)
	must(t, e.locks.Define(bg, "gpu", 1))

	if err := chromedp.Do(ctx, chromedp.Navigate(e.http.URL)); err != nil {
		t.Fatal(err)
	}
	within(t, ctx, "the live stream", `document.querySelector("#conn.on") && document.querySelector('.lock[data-name="gpu"]')`)

	start := time.Now()
	_, err := e.locks.Acquire(bg, "gpu", sleeplock.Ref("job-1"), sleeplock.Kind("render"))
	must(t, err)
	waiting := make(chan error, 1)
	go func() {
		l, err := e.locks.Acquire(bg, "gpu", sleeplock.Ref("job-2"), sleeplock.Kind("train"))
		if err == nil {
			_ = l // released through the API below
		}
		waiting <- err
	}()
	gpu := `document.querySelector('.lock[data-name="gpu"]')`
	d := within(t, ctx, "the holder and the queue", gpu+`.querySelector(".cell.held.k-render .ref")?.textContent === "job-1" && `+
		gpu+`.querySelector(".queue li .ref")?.textContent === "job-2"`)
	t.Logf("the page showed the holder and the queue %v after the acquire (%v since the first call)", d, time.Since(start))

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(t.TempDir(), "serve.png"), shot, 0o644))
	if p := os.Getenv("SLEEPLOCK_SCREENSHOT"); p != "" {
		must(t, os.WriteFile(p, shot, 0o644))
	}

	if code, _, body := e.do(t, "POST", "/api/locks/gpu/release?ref=job-1", testToken); code != 200 {
		t.Fatalf("release job-1: %d %s", code, body)
	}
	must(t, <-waiting)
	within(t, ctx, "job-2 holding", gpu+`.querySelector(".cell.held .ref")?.textContent === "job-2" && !`+gpu+`.querySelector(".queue")`)
	if code, _, body := e.do(t, "POST", "/api/locks/gpu/release?ref=job-2", testToken); code != 200 {
		t.Fatalf("release job-2: %d %s", code, body)
	}
	within(t, ctx, "the lock cleared", `!`+gpu+`.querySelector(".cell.held") && `+gpu+`.querySelectorAll(".cell.free").length === 1 && !`+gpu+`.querySelector(".queue")`)
	within(t, ctx, "the feed", `[...document.querySelectorAll("#feed li")].some(li => li.textContent.includes("released") && li.textContent.includes("job-2"))`)
}

// scene gives the page something to show besides the lock under test:
// holders of several kinds, a family, a lock of 1,000,000 slots with 3
// holders, and a few grants that waited (for the wait-time chart).
func scene(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	must(t, e.locks.Define(ctx, "payments", 3))
	must(t, e.locks.Define(ctx, "pool", 1_000_000))
	for _, ref := range []string{"a", "b", "c"} {
		_, err := e.locks.Acquire(ctx, "pool", sleeplock.Ref("pool-"+ref), sleeplock.Kind("worker"))
		must(t, err)
	}
	must(t, e.locks.Define(ctx, "chat/*", 1))
	must(t, e.locks.Define(ctx, "batch", 1))
	for _, h := range []struct {
		lock, ref, kind string
		ttl             time.Duration
	}{
		{"payments", "api-7f3a", "api", 0}, {"payments", "kafka-consumer-2", "kafka", 0},
		{"chat/42", "turn-9c1e", "turn", 10 * time.Minute}, {"chat/57", "click-44d0", "click", 30 * time.Second},
	} {
		opts := []sleeplock.AcquireOption{sleeplock.Ref(h.ref), sleeplock.Kind(h.kind)}
		if h.ttl > 0 {
			opts = append(opts, sleeplock.TTL(h.ttl))
		}
		_, err := e.locks.Acquire(ctx, h.lock, opts...)
		must(t, err)
	}
	for i, d := range []time.Duration{30, 90, 15, 160, 60, 110} {
		a, err := e.locks.Acquire(ctx, "batch")
		must(t, err)
		got := make(chan error, 1)
		go func() {
			b, err := e.locks.Acquire(ctx, "batch", sleeplock.Ref(fmt.Sprintf("batch-%d", i)))
			if err == nil {
				err = b.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(d * time.Millisecond) // a wait of d for the chart, not synchronisation
		must(t, a.Release(ctx))
		must(t, <-got)
	}
}

// TestBrowserManyLocks: with 10,000 locks the page shows the first 100,
// filters by prefix, and follows a change in a filtered view.
func TestBrowserManyLocks(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	e := newEnv(t, Config{})
	for i := range 10_000 {
		must(t, e.locks.Define(bg, fmt.Sprintf("job/%05d", i), 2))
	}
	start := time.Now()
	must(t, chromedp.Do(ctx, chromedp.Navigate(e.http.URL)))
	within(t, ctx, "the first page", `document.querySelectorAll(".lock").length === 100 && document.getElementById("count").textContent === "showing 100 of 10000 locks"`)
	t.Logf("10,000 locks: first 100 shown %v after navigation", time.Since(start))

	start = time.Now()
	must(t, chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[chromedp.Void](`(() => { const i = document.getElementById("prefix"); i.value = "job/0999"; i.dispatchEvent(new Event("input")); })()`)(ctx, tg)
		return err
	})))
	within(t, ctx, "the filtered locks", `document.querySelectorAll(".lock").length === 10 && document.getElementById("count").textContent === "10 locks"`)
	t.Logf("10,000 locks: filter to 10 shown %v after typing (200 ms of it is the typing pause)", time.Since(start))

	start = time.Now()
	_, err := e.locks.Acquire(bg, "job/09995", sleeplock.Ref("r-1"))
	must(t, err)
	within(t, ctx, "the holder in the filtered view", `document.querySelector('.lock[data-name="job/09995"] .cell.held .ref')?.textContent === "r-1"`)
	t.Logf("10,000 locks: a holder shown %v after the acquire", time.Since(start))
}
