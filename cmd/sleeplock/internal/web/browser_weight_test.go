package web

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sleeplock/sleeplock"
)

// TestBrowserExclusiveOneWay: an exclusive holder and an exclusive waiter
// are shown the same way on the page ("exclusive"), as in state's table
// and JSON (issue 29 B8), never as a slot count for one and "every slot"
// for the other.
func TestBrowserExclusiveOneWay(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(bg, "w", 4))
	held, err := e.locks.Acquire(bg, "w", sleeplock.Ref("writer-1"), sleeplock.Exclusive())
	must(t, err)
	wctx, cancel := context.WithCancel(bg)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := e.locks.Acquire(wctx, "w", sleeplock.Ref("writer-2"), sleeplock.Exclusive())
		waited <- err
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(e.http.URL)); err != nil {
		t.Fatal(err)
	}
	w := `document.querySelector('.lock[data-name="w"]')`
	within(t, ctx, "the exclusive holder and waiter, each shown as exclusive",
		w+`?.querySelector(".cell.held .kind")?.textContent === "holder · exclusive" && `+
			w+`?.querySelector(".queue li")?.textContent.includes("writer-2 · exclusive")`)
	cancel()
	<-waited
	must(t, held.Release(bg))
}
