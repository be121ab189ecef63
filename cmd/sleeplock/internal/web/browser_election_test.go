package web

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/election"
)

// TestBrowserElection: the API gives an election's lock its "election"
// (leader, value, token, since, candidates waiting), and the page shows it
// as a row of the lock's card, following a hand-over without a reload.
func TestBrowserElection(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(bg, "gpu", 1))
	_, err := e.locks.Acquire(bg, "gpu", sleeplock.Ref("job-1"))
	must(t, err)
	el, err := election.New(e.locks, "scheduler", election.WithTTL(time.Hour))
	must(t, err)
	term, err := el.Campaign(bg, election.Candidate{ID: "host-a", Value: "10.0.0.1:8080"})
	must(t, err)
	next := make(chan *election.Term, 1)
	go func() {
		t, err := el.Campaign(bg, election.Candidate{ID: "host-b"})
		if err == nil {
			next <- t
		}
		close(next)
	}()
	for {
		st, err := e.locks.State(bg, "scheduler")
		must(t, err)
		if st.Waiting == 1 {
			break
		}
		time.Sleep(time.Millisecond) // the memory store's queue: polled, nothing signals it
	}

	code, _, body := e.do(t, "GET", "/api/locks/scheduler", "")
	var v lockview.Lock
	if code != 200 || json.Unmarshal(body, &v) != nil || v.Election == nil {
		t.Fatalf("GET /api/locks/scheduler: %d %s; want its election", code, body)
	}
	if got := *v.Election; got.Leader != "host-a" || got.Value != "10.0.0.1:8080" || got.Token != term.Token() || got.Waiting != 1 || got.Vacant {
		t.Fatalf("the API's election %+v; want host-a leading with token %d, 1 waiting", got, term.Token())
	}

	must(t, chromedp.Do(ctx, chromedp.Navigate(e.http.URL)))
	row := `document.querySelector('.lock[data-name="scheduler"] .election')`
	within(t, ctx, "the election row", row+`?.querySelector(".leader")?.textContent === "host-a" && `+
		row+`.querySelector(".value")?.textContent === "10.0.0.1:8080" && `+
		row+`.querySelector(".token")?.textContent === "`+strconv.FormatInt(term.Token(), 10)+`" && `+
		row+`.textContent.includes("1 candidate waiting")`)
	must(t, term.Resign(bg))
	b := <-next
	if b == nil {
		t.Fatal("host-b's campaign failed")
	}
	within(t, ctx, "the new leader", row+`?.querySelector(".leader")?.textContent === "host-b" && `+
		row+`.querySelector(".token")?.textContent === "`+strconv.FormatInt(b.Token(), 10)+`" && `+
		row+`.textContent.includes("0 candidates waiting")`)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".election").length`))
	must(t, err)
	if n != 1 {
		t.Fatalf("%d election rows; want 1 (the plain lock of one slot has none)", n)
	}
	must(t, b.Resign(bg))
}
