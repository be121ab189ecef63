package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLoading: the page says it is loading until the locks come,
// and shows them without waiting for the live stream.
func TestBrowserLoading(t *testing.T) {
	ctx := browser(t)
	e := newEnv(t, Config{})
	must(t, e.locks.Define(context.Background(), "pay", 1))
	locksGate, eventsGate := make(chan struct{}), make(chan struct{})
	open := func(gates ...chan struct{}) {
		for _, g := range gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
	}
	gated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate := map[string]chan struct{}{"/api/locks": locksGate, "/api/events": eventsGate}[r.URL.Path]
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		e.srv.ServeHTTP(w, r)
	}))
	defer func() {
		open(locksGate, eventsGate)
		e.srv.Close() // ends the stream, which gated.Close waits for
		gated.Close()
	}()

	must(t, chromedp.Do(ctx, chromedp.Navigate(gated.URL)))
	within(t, ctx, "the loading state", `document.querySelector("#locks .loading")?.textContent === "loading the locks…" && document.getElementById("conn").textContent === "connecting"`)
	open(locksGate)
	within(t, ctx, "the locks before the stream", `document.querySelector('.lock[data-name="pay"] .cell.free') && !document.querySelector("#locks .loading") && document.getElementById("conn").textContent === "connecting"`)
	open(eventsGate)
	within(t, ctx, "the live stream", `document.querySelector("#conn.on")`)
}

// TestBrowserLayout: a lock of 1,000,000 slots is drawn as a gauge with
// its holders, not as cells; at 1,200 px and at 420 px nothing is wider
// than the window, the counters table included.
func TestBrowserLayout(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	e := newEnv(t, Config{})
	scene(t, e) // with "pool", 1,000,000 slots and 3 holders
	long := "tenant/8f14e45fceea167a5a36dedd4bea2543/exports"
	must(t, e.locks.Define(bg, long, 2))
	for range 123_456 { // counts of six digits in the table
		l, err := e.locks.TryAcquire(bg, long)
		must(t, err)
		must(t, l.Release(bg))
	}

	for _, width := range []int64{1200, 420} {
		must(t, chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(e.http.URL)))
		pool := `document.querySelector('.lock[data-name="pool"]')`
		within(t, ctx, "the gauge", pool+`?.querySelector(".gauge .used") && `+pool+`.querySelectorAll(".cell").length === 3 && !`+pool+`.querySelector(".cell.free") && `+
			pool+`.querySelector(".gaugetext").textContent.startsWith("3 of 1,000,000 slots in use") && !`+pool+`.textContent.includes("more slots")`)
		within(t, ctx, "the counters", `document.querySelectorAll("#stats tr").length >= 6 && document.getElementById("stats").textContent.includes("123k")`)
		// A long name is cut with an ellipsis (its cell's title holds it).
		fits := `document.documentElement.scrollWidth <= window.innerWidth && ` +
			`[...document.querySelectorAll("#stats, aside, .lock, header")].every(el => el.getBoundingClientRect().right <= window.innerWidth && el.scrollWidth <= el.clientWidth + 1) && ` +
			`[...document.querySelectorAll("#stats td")].every(el => el.getBoundingClientRect().right <= document.querySelector("aside").getBoundingClientRect().right)`
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fits))
		must(t, err)
		if !ok {
			widths, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("#stats, aside, .lock, header, #stats td")].filter(el => el.scrollWidth > el.clientWidth + 1 || el.getBoundingClientRect().right > window.innerWidth).map(el => [el.tagName, el.className, el.textContent.slice(0, 30), el.scrollWidth, el.clientWidth, el.getBoundingClientRect().right]))`))
			t.Fatalf("at %d px the page is wider than the window: %s", width, widths)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(t.TempDir(), "layout.png"), shot, 0o644))
		if dir := os.Getenv("SLEEPLOCK_SCREENSHOT_DIR"); dir != "" {
			must(t, os.WriteFile(filepath.Join(dir, "layout-"+strconv.FormatInt(width, 10)+".png"), shot, 0o644))
		}
	}
}
