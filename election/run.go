package election

import (
	"context"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// resignTimeout bounds the Resign that Run makes after fn returns.
const resignTimeout = 10 * time.Second

// Run campaigns with c and, each time c leads, calls fn with the term and
// a context that ends when the term ends (or ctx does). Only after fn has
// returned does Run resign, so the next leader never starts while fn
// still runs here (as long as fn stops when its context ends). When fn
// returns, the term ends and Run campaigns again, unless ctx has ended.
//
// Run returns ctx's error once ctx ends, an error of Campaign, or fn's
// error when fn failed while its term still held (a term that ended
// explains fn's error, and Run campaigns again). A panic in fn resigns
// and goes on.
func (e *Election) Run(ctx context.Context, c Candidate, fn func(ctx context.Context, t *Term) error) error {
	if err := e.usable(ctx); err != nil {
		return err
	}
	if fn == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "Run needs a function to run while leading")
	}
	for {
		t, err := e.Campaign(ctx, c)
		if err != nil {
			return err
		}
		held, err := e.serve(ctx, t, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && held {
			return err
		}
	}
}

// serve runs fn for term t and resigns after it returns (or panics). held
// reports whether the term still held when fn returned.
func (e *Election) serve(ctx context.Context, t *Term, fn func(ctx context.Context, t *Term) error) (held bool, err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(t.Context(), func() { cancel(context.Cause(t.Context())) })
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
		_ = t.Resign(rctx)
		rcancel()
	}()
	err = fn(fctx, t)
	return t.Err() == nil, err
}
