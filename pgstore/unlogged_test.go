package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// TestUnloggedAndBack: WithUnlogged makes the lease and queue tables
// UNLOGGED and keeps the token sequence logged, so that tokens never
// repeat after a crash; WithLogged turns the tables back; a Migrate with
// neither leaves them as they are; Store.Unlogged tells which they are;
// and tokens keep growing across the switches, the holds kept.
func TestUnloggedAndBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "u/*", 1)
	persistence := func(rel string) string {
		t.Helper()
		var p string
		must(t, e.pool.QueryRow(ctx, "SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass",
			pgx.Identifier{e.schema, rel}.Sanitize()).Scan(&p))
		return p
	}
	mode := func(want bool) {
		t.Helper()
		got, err := e.s.Unlogged(ctx)
		must(t, err)
		if got != want {
			t.Fatalf("Unlogged() = %v, want %v", got, want)
		}
		p := "p"
		if want {
			p = "u"
		}
		for _, rel := range []string{"locks", "holders", "waiters", "queue", "cancelled", "nodes"} {
			if got := persistence(rel); got != p {
				t.Fatalf("table %s: persistence %q, want %q", rel, got, p)
			}
		}
		for _, rel := range []string{"tokens", "tickets", "seqs", "defs"} {
			if got := persistence(rel); got != "p" {
				t.Fatalf("%s: persistence %q, want p (logged) whatever the tables", rel, got)
			}
		}
	}
	migrate := func(opts ...pgstore.Option) {
		t.Helper()
		must(t, pgstore.Migrate(ctx, e.pool, append(opts, pgstore.WithSchema(e.schema))...))
	}
	mode(false)
	var last int64
	var held []store.Grant
	grant := func(step string) {
		t.Helper()
		g, err := e.s.Acquire(ctx, req("r", time.Minute, "u/"+step))
		must(t, err)
		if g.Token <= last {
			t.Fatalf("%s: token %d after %d: tokens must grow", step, g.Token, last)
		}
		last = g.Token
		held = append(held, g)
	}
	grant("first")
	for _, step := range []struct {
		name     string
		opts     []pgstore.Option
		unlogged bool
	}{
		{"unlogged", []pgstore.Option{pgstore.WithUnlogged()}, true},
		{"plain-after-unlogged", nil, true},
		{"logged", []pgstore.Option{pgstore.WithLogged()}, false},
		{"plain-after-logged", nil, false},
		{"unlogged-again", []pgstore.Option{pgstore.WithUnlogged()}, true},
		{"logged-again", []pgstore.Option{pgstore.WithLogged()}, false},
	} {
		migrate(step.opts...)
		mode(step.unlogged)
		grant(step.name)
	}
	for _, g := range held {
		st, err := e.s.Held(ctx, g.Handle())
		must(t, err)
		if !st.Held {
			t.Fatalf("%s was lost when the tables were switched", g.Name)
		}
	}
}

// TestLoggedAndUnloggedContradict: asking both is refused, naming both,
// and changes nothing.
func TestLoggedAndUnloggedContradict(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	err := pgstore.Migrate(ctx, e.pool, pgstore.WithSchema(e.schema), pgstore.WithUnlogged(), pgstore.WithLogged())
	if !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithLogged and WithUnlogged") {
		t.Fatalf("Migrate with WithUnlogged and WithLogged: %v", err)
	}
	if u, err := e.s.Unlogged(ctx); err != nil || u {
		t.Fatalf("after the refused Migrate: Unlogged() = %v, %v; want false", u, err)
	}
}
