package turns_test

// One test for every sentence of the turn locks' reference, as package
// turns' documentation restates it (turns.go: the package comment and each
// function's doc comment; README "Turn locks of a chat back end"), named
// after the sentence, with the sentence quoted above it. Every test runs
// on every store in factories.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/turns"
)

// "The two locks of a turn …, both rows in the database: the chat's — …:
// one turn per chat;"
func TestTwoLocksOfATurn_OneTurnPerChat(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		tu := c.node(0)
		must(t, second(tu.Acquire(t.Context(), "42", "7", "turn-a")))
		if c.holder("chat/42") != "turn-a" || c.holder("user/7") != "turn-a" {
			t.Fatal("a turn holds the chat's and the user's lock")
		}
		wantErr(t, second(tu.Acquire(t.Context(), "42", "8", "turn-b")), turns.ErrConversationBusy)
		must(t, tu.Release(t.Context(), "42", "7", "turn-a"))
		must(t, second(tu.Acquire(t.Context(), "42", "8", "turn-b")))
	})
}

// "- the user's — the same columns of phoenix_kit_agent_user_settings …: one
// turn in flight per user, so parallel chats cannot run past a limit."
func TestTwoLocksOfATurn_OneTurnInFlightPerUser_ParallelChatsCannotRunPastLimit(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		tu := c.node(0)
		must(t, second(tu.Acquire(t.Context(), "1", "7", "turn-a")))
		for _, chat := range []string{"2", "3", "4"} {
			wantErr(t, second(tu.Acquire(t.Context(), chat, "7", "turn-"+chat)), turns.ErrTurnInFlight)
		}
		// Other users' chats run in parallel.
		must(t, second(tu.Acquire(t.Context(), "2", "8", "turn-b")))
		must(t, tu.Release(t.Context(), "1", "7", "turn-a"))
		must(t, second(tu.Acquire(t.Context(), "3", "7", "turn-c")))
	})
}

// "(the row is created empty when the user has none)"
func TestUserWithNoLockRowYetNeedsNoSetUp(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		if st := c.state("user/never-seen"); st.Slots != 1 || st.Running != 0 {
			t.Fatalf("a user not seen before: %+v", st)
		}
		must(t, second(c.node(0).Acquire(t.Context(), "1", "never-seen", "turn-a")))
		if c.holder("user/never-seen") != "turn-a" {
			t.Fatal("the user's lock was not taken")
		}
	})
}

// "Each is taken by one atomic statement that succeeds only when the lock is
// free or older than its TTL (busy_since < now - ttl),"
func TestLockTakenOnlyWhenFreeOrOlderThanTTL(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		tu := c.node(0)
		a, err := tu.Acquire(t.Context(), "1", "7", "turn-a")
		must(t, err)
		c.advance(ttl - time.Second)
		wantErr(t, second(tu.Acquire(t.Context(), "1", "8", "turn-b")), turns.ErrConversationBusy)
		wantErr(t, second(tu.Acquire(t.Context(), "2", "7", "turn-b")), turns.ErrTurnInFlight)
		c.advance(2 * time.Second)
		b, err := tu.Acquire(t.Context(), "1", "7", "turn-b")
		must(t, err)
		if b.Tokens()[0] <= a.Tokens()[0] || b.Tokens()[1] <= a.Tokens()[1] {
			t.Fatalf("tokens %v after %v", b.Tokens(), a.Tokens())
		}
	})
}

// "… so a lock left by a node that went down frees itself."
func TestLockLeftByDeadNodeFreesItselfAfterTTL(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		c.crash(0)
		wantErr(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-b")), turns.ErrConversationBusy)
		c.advance(ttl + time.Second)
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-b")))
		ok, err := c.node(1).Held(t.Context(), "1", "7", "turn-b")
		wantBool(t, "Held", ok, err, true)
	})
}

// "No advisory lock: it would hold a pool connection for the whole turn."
func TestNoAdvisoryLock_NoConnectionHeldForTheWholeTurn(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		if c.f.pinned == nil {
			t.Skip("vacuous on the memory store: it has no connections")
		}
		tu := c.node(0)
		_, err := tu.Held(t.Context(), "1", "7", "turn-a")
		must(t, err)
		idle := c.f.pinned(c.locks[0]) // whatever the store keeps for itself
		must(t, second(tu.Acquire(t.Context(), "1", "7", "turn-a")))
		must(t, second(tu.AcquireUser(t.Context(), "8", turns.ClickRef(), ttl, hold)))
		if n := c.f.pinned(c.locks[0]); n > idle {
			t.Fatalf("%d connections in use while a turn and a click hold their locks, %d before", n, idle)
		}
		ok, err := tu.Held(t.Context(), "1", "7", "turn-a")
		wantBool(t, "Held", ok, err, true)
		must(t, tu.Release(t.Context(), "1", "7", "turn-a"))
	})
}

// "A lock is released only by the turn that holds it (busy_turn_ref),"
func TestLockReleasedOnlyByTurnThatHoldsIt(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		wantErr(t, c.node(1).Release(t.Context(), "1", "7", "turn-b"), sleeplock.ErrNotHeld)
		wantErr(t, c.node(1).ReleaseUser(t.Context(), "7", turns.ClickRef()), sleeplock.ErrNotHeld)
		wantErr(t, c.node(1).ReleaseUser(t.Context(), "7", "turn-b"), sleeplock.ErrNotHeld)
		ok, err := c.node(1).Held(t.Context(), "1", "7", "turn-a")
		wantBool(t, "Held by the holder after others' releases", ok, err, true)
		must(t, c.node(1).Release(t.Context(), "1", "7", "turn-a")) // by ref, from any node
		if c.holder("chat/1") != "" || c.holder("user/7") != "" {
			t.Fatal("the holder's release left a lock held")
		}
	})
}

// "… so a late release cannot free a newer turn,"
func TestLateReleaseCannotFreeNewerTurn(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		c.advance(ttl + time.Second) // turn-a stalled past its TTL
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-b")))
		wantErr(t, c.node(0).Release(t.Context(), "1", "7", "turn-a"), sleeplock.ErrNotHeld) // late: freed nothing
		ok, err := c.node(1).Held(t.Context(), "1", "7", "turn-b")
		wantBool(t, "newer turn's Held after a late release", ok, err, true)
		wantErr(t, second(c.node(0).Acquire(t.Context(), "1", "8", "turn-c")), turns.ErrConversationBusy)
		wantErr(t, second(c.node(0).Acquire(t.Context(), "2", "7", "turn-c")), turns.ErrTurnInFlight)
	})
}

// "… and a running turn checks before each round that it still holds both
// (held?/3): a turn whose lock was taken over stops there."
func TestRunningTurnChecksBeforeEachRound_TakenOverTurnStops(t *testing.T) {
	for _, lost := range []string{"chat", "user"} {
		t.Run("lost "+lost, func(t *testing.T) {
			each(t, 2, func(t *testing.T, c *cluster) {
				a := c.node(0)
				must(t, second(a.Acquire(t.Context(), "1", "7", "turn-a")))
				rounds := 0
				for round := 1; round <= 5; round++ {
					held, err := a.Held(t.Context(), "1", "7", "turn-a")
					must(t, err)
					if !held {
						break
					}
					rounds++
					if round == 2 {
						// The turn stalls past its TTL; another node takes a
						// lock over.
						c.advance(ttl + time.Second)
						if lost == "chat" {
							must(t, second(c.node(1).Acquire(t.Context(), "1", "8", "turn-b")))
						} else {
							must(t, second(c.node(1).AcquireUser(t.Context(), "7", turns.ClickRef(), ttl, hold)))
						}
					}
				}
				if rounds != 2 {
					t.Fatalf("the turn ran %d rounds, want 2 (it must stop once its %s lock was taken over)", rounds, lost)
				}
				// One of its locks was taken over: the release frees the
				// other and says it freed only part.
				wantErr(t, a.Release(t.Context(), "1", "7", "turn-a"), sleeplock.ErrNotHeld)
			})
		})
	}
}

// "Times are the database's (now()), so the TTL does not depend on the
// clocks of the nodes."
func TestTimesAreTheStoresClock_TTLDoesNotDependOnNodeClocks(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		// The store's clock moves; the nodes' clocks barely do (the test
		// takes milliseconds), yet the TTL passes: it is judged by the store.
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		c.advance(ttl - time.Minute)
		fresh, err := c.node(1).Fresh(t.Context(), "1", "turn-a", ttl)
		wantBool(t, "Fresh before the TTL on the store's clock", fresh, err, true)
		wantErr(t, second(c.node(1).Acquire(t.Context(), "1", "8", "turn-b")), turns.ErrConversationBusy)
		c.advance(2 * time.Minute)
		fresh, err = c.node(1).Fresh(t.Context(), "1", "turn-a", ttl)
		wantBool(t, "Fresh after the TTL on the store's clock", fresh, err, false)
		must(t, second(c.node(1).Acquire(t.Context(), "1", "8", "turn-b")))
	})
}

// "Neither statement touches updated_at of a settings row: that stays the
// time the settings themselves last changed." Run on PostgreSQL only: on the
// memory store there is no application data, so it would be vacuous.
func TestNeitherStatementTouchesApplicationData(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		if c.f.app == nil {
			t.Skip("vacuous on the memory store: it has no application data")
		}
		ctx := t.Context()
		db, schema := c.f.app(t, c.locks[0])
		table := `"` + schema + `".user_settings`
		must(t, db.Exec(ctx, `CREATE TABLE `+table+` (user_id text PRIMARY KEY, settings jsonb NOT NULL,
			updated_at timestamptz NOT NULL)`))
		must(t, db.Exec(ctx, `INSERT INTO `+table+` VALUES ('7', '{"model":"a"}', '2025-01-02 03:04:05+00'),
			('8', '{}', '2025-06-07 08:09:10+00')`))
		read := func() [][]any {
			rows, err := db.Rows(ctx, `SELECT user_id, settings::text, updated_at, xmin::text FROM `+table+` ORDER BY user_id`)
			must(t, err)
			return rows
		}
		before := read()

		a, b := c.node(0), c.node(1)
		must(t, second(a.Acquire(ctx, "1", "7", "turn-a")))
		_, _ = a.Held(ctx, "1", "7", "turn-a")
		_, _ = b.Fresh(ctx, "1", "turn-a", ttl)
		wantErr(t, second(b.Acquire(ctx, "2", "7", "turn-b")), turns.ErrTurnInFlight)
		must(t, a.Release(ctx, "1", "7", "turn-a"))
		click := turns.ClickRef()
		must(t, second(b.AcquireUser(ctx, "8", click, ttl, hold)))
		_, _ = b.KeepUser(ctx, "8", click, ttl, hold)
		must(t, b.ReleaseUser(ctx, "8", click))
		must(t, second(a.Acquire(ctx, "1", "8", "turn-c")))
		c.advance(ttl + time.Second)
		_, _ = b.ReleaseStale(ctx, "1", "8", "turn-c", ttl)

		after := read()
		if len(after) != len(before) {
			t.Fatalf("rows %v, were %v", after, before)
		}
		for i := range before {
			for j := range before[i] {
				if !equalValue(before[i][j], after[i][j]) {
					t.Fatalf("application row changed: %v, was %v", after[i], before[i])
				}
			}
		}
	})
}

func equalValue(a, b any) bool {
	if ta, ok := a.(time.Time); ok {
		tb, ok := b.(time.Time)
		return ok && ta.Equal(tb)
	}
	return a == b
}

// "A click on a confirmation card (PhoenixKitAgent.Confirmations) takes the
// user's lock alone (acquire_user/4) under a ref of its own (click_ref/0):"
func TestClickTakesUsersLockAloneUnderRefOfItsOwn(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		tu := c.node(0)
		click := turns.ClickRef()
		must(t, second(tu.AcquireUser(t.Context(), "7", click, ttl, hold)))
		st := c.state("user/7")
		if len(st.Holders) != 1 || st.Holders[0].Ref != click || st.Holders[0].Kind != turns.KindClick {
			t.Fatalf("user lock holders %+v", st.Holders)
		}
		if n := c.state("chat/1").Running; n != 0 {
			t.Fatal("a click took a chat's lock")
		}
		// The chat is free for another user's turn.
		must(t, second(tu.Acquire(t.Context(), "1", "8", "turn-a")))
	})
}

// "… it is refused while a turn of the user runs,"
func TestClickRefusedWhileTurnOfUserRuns(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		click := turns.ClickRef()
		wantErr(t, second(c.node(1).AcquireUser(t.Context(), "7", click, ttl, hold)), turns.ErrTurnInFlight)
		c.advance(ttl - time.Second) // a turn still running is never taken over
		wantErr(t, second(c.node(1).AcquireUser(t.Context(), "7", click, ttl, hold)), turns.ErrTurnInFlight)
		must(t, c.node(0).Release(t.Context(), "1", "7", "turn-a"))
		must(t, second(c.node(1).AcquireUser(t.Context(), "7", click, ttl, hold)))
	})
}

// "… and no turn starts while it runs —"
func TestNoTurnStartsWhileClickRuns(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		click := turns.ClickRef()
		must(t, second(c.node(0).AcquireUser(t.Context(), "7", click, ttl, hold)))
		for _, chat := range []string{"1", "2"} {
			wantErr(t, second(c.node(1).Acquire(t.Context(), chat, "7", "turn-"+chat)), turns.ErrClickInFlight)
			if c.holder("chat/"+chat) != "" {
				t.Fatal("a refused turn took the chat's lock")
			}
		}
		must(t, c.node(0).ReleaseUser(t.Context(), "7", click))
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-1")))
	})
}

// "— the click keeps its lock fresh (keep_user/4) for as long as it runs."
// and keep_user/4: "a click that runs longer than its hold keeps blocking a
// turn."
func TestClickKeepsBlockingTurnWhileKeptFresh(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		click := turns.ClickRef()
		must(t, second(c.node(0).AcquireUser(t.Context(), "7", click, ttl, hold)))
		for i := range 10 { // 10 × 20 s: far longer than the 30 s hold
			c.advance(20 * time.Second)
			kept, err := c.node(0).KeepUser(t.Context(), "7", click, ttl, hold)
			wantBool(t, "KeepUser", kept, err, true)
			if _, err := c.node(1).Acquire(t.Context(), "1", "7", "turn-a"); !errors.Is(err, turns.ErrClickInFlight) {
				t.Fatalf("after %d s of a kept click: %v, want ErrClickInFlight", (i+1)*20, err)
			}
		}
		// The click stops keeping (its node went down): a turn takes it over
		// a hold later.
		c.advance(hold + time.Second)
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-a")))
	})
}

// "Whoever is refused the user's lock learns what holds it: :turn_in_flight
// (a turn) or :click_in_flight (a click)."
func TestRefusedUserLockLearnsWhatHoldsIt(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		a, b := c.node(0), c.node(1)
		check := func(err, want error, kind string) {
			t.Helper()
			wantErr(t, err, want)
			var busy *sleeplock.BusyError
			if !errors.As(err, &busy) || busy.Lock != "user/7" || busy.Kind != kind {
				t.Fatalf("refusal %v does not tell the user's lock held by a %s", err, kind)
			}
		}
		must(t, second(a.Acquire(ctx, "1", "7", "turn-a")))
		check(second(b.Acquire(ctx, "2", "7", "turn-b")), turns.ErrTurnInFlight, turns.KindTurn)           // a turn refused by a turn
		check(second(b.AcquireUser(ctx, "7", turns.ClickRef(), ttl, hold)), turns.ErrTurnInFlight, "turn") // a click refused by a turn
		must(t, a.Release(ctx, "1", "7", "turn-a"))
		click := turns.ClickRef()
		must(t, second(a.AcquireUser(ctx, "7", click, ttl, hold)))
		check(second(b.Acquire(ctx, "2", "7", "turn-b")), turns.ErrClickInFlight, turns.KindClick)           // a turn refused by a click
		check(second(b.AcquireUser(ctx, "7", turns.ClickRef(), ttl, hold)), turns.ErrClickInFlight, "click") // a click refused by a click
	})
}

// acquire/3: "Takes both locks for turn_ref, or neither."
func TestAcquire_TakesBothLocksForTurnRefOrNeither(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		tu := c.node(0)
		lease, err := tu.Acquire(t.Context(), "1", "7", "turn-a")
		must(t, err)
		if c.holder("chat/1") != "turn-a" || c.holder("user/7") != "turn-a" {
			t.Fatal("not both locks taken")
		}
		// The lease is of both locks, chat first, with their fencing tokens.
		names, tokens := lease.Names(), lease.Tokens()
		if lease.Ref() != "turn-a" || len(names) != 2 || names[0] != "chat/1" || names[1] != "user/7" ||
			len(tokens) != 2 || tokens[0] != c.state("chat/1").Holders[0].Token || tokens[1] != c.state("user/7").Holders[0].Token {
			t.Fatalf("lease of %q: locks %v, tokens %v", lease.Ref(), names, tokens)
		}
		// The user is busy: the chat is not taken either.
		wantErr(t, second(tu.Acquire(t.Context(), "2", "7", "turn-b")), turns.ErrTurnInFlight)
		if c.holder("chat/2") != "" {
			t.Fatal("a refused turn kept the chat's lock")
		}
		// The chat is busy: the user is not taken either.
		wantErr(t, second(tu.Acquire(t.Context(), "1", "8", "turn-c")), turns.ErrConversationBusy)
		if c.holder("user/8") != "" {
			t.Fatal("a refused turn kept the user's lock")
		}
	})
}

// acquire/3: "The chat is tried first, so a second turn in the same chat is
// :conversation_busy;"
func TestAcquire_SecondTurnInSameChatIsConversationBusy(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		// Same chat, same user: both locks are busy, the chat is told first.
		wantErr(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-b")), turns.ErrConversationBusy)
		// Same chat, and the other user busy with a click: still the chat.
		must(t, second(c.node(1).AcquireUser(t.Context(), "8", turns.ClickRef(), ttl, hold)))
		_, err := c.node(1).Acquire(t.Context(), "1", "8", "turn-c")
		wantErr(t, err, turns.ErrConversationBusy)
		if errors.Is(err, turns.ErrClickInFlight) || errors.Is(err, turns.ErrTurnInFlight) {
			t.Fatalf("%v matches more than ErrConversationBusy", err)
		}
	})
}

// acquire/3: "a turn of the user in another chat is :turn_in_flight,"
func TestAcquire_TurnOfUserInAnotherChatIsTurnInFlight(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		wantErr(t, second(c.node(1).Acquire(t.Context(), "2", "7", "turn-b")), turns.ErrTurnInFlight)
	})
}

// acquire/3: "… a click of the user :click_in_flight."
func TestAcquire_ClickOfUserIsClickInFlight(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).AcquireUser(t.Context(), "7", turns.ClickRef(), ttl, hold)))
		wantErr(t, second(c.node(1).Acquire(t.Context(), "2", "7", "turn-b")), turns.ErrClickInFlight)
	})
}

// acquire_user/4: "Takes the user's lock alone for ref (a click on a
// confirmation card), or {:error, :turn_in_flight | :click_in_flight}."
func TestAcquireUser_TakesUsersLockAloneOrTellsWhatHoldsIt(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		tu := c.node(0)
		click := turns.ClickRef()
		must(t, second(tu.AcquireUser(t.Context(), "7", click, ttl, hold)))
		if c.holder("user/7") != click {
			t.Fatal("the click does not hold the user's lock")
		}
		wantErr(t, second(tu.AcquireUser(t.Context(), "7", turns.ClickRef(), ttl, hold)), turns.ErrClickInFlight)
		must(t, second(tu.Acquire(t.Context(), "1", "8", "turn-a")))
		wantErr(t, second(tu.AcquireUser(t.Context(), "8", turns.ClickRef(), ttl, hold)), turns.ErrTurnInFlight)
	})
}

// acquire_user/4: "ttl_s is how old another holder's lock must be to be
// taken over — the TTL of a turn's locks, so a turn still running is never
// taken over;"
func TestAcquireUser_TTLIsHowOldAnotherHoldersLockMustBe_RunningTurnNeverTakenOver(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		click := turns.ClickRef()
		c.advance(ttl - time.Second)
		wantErr(t, second(c.node(1).AcquireUser(t.Context(), "7", click, ttl, hold)), turns.ErrTurnInFlight)
		ok, err := c.node(0).Held(t.Context(), "1", "7", "turn-a")
		wantBool(t, "the running turn's Held", ok, err, true)
		c.advance(2 * time.Second) // older than the TTL: a dead node's turn
		must(t, second(c.node(1).AcquireUser(t.Context(), "7", click, ttl, hold)))
	})
}

// acquire_user/4: "hold_s (at most ttl_s) is how long this lock blocks a
// turn:"
func TestAcquireUser_HoldAtMostTTLIsHowLongItBlocksATurn(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		wantErr(t, second(c.node(0).AcquireUser(t.Context(), "7", turns.ClickRef(), ttl, ttl+time.Second)), sleeplock.ErrInvalidHold)
		must(t, second(c.node(0).AcquireUser(t.Context(), "7", turns.ClickRef(), ttl, hold)))
		c.advance(hold - time.Second)
		wantErr(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-a")), turns.ErrClickInFlight)
		c.advance(2 * time.Second)
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-a")))
		// hold = ttl: the click blocks a turn for the whole TTL.
		must(t, second(c.node(0).AcquireUser(t.Context(), "8", turns.ClickRef(), ttl, ttl)))
		c.advance(ttl - time.Second)
		wantErr(t, second(c.node(1).Acquire(t.Context(), "2", "8", "turn-b")), turns.ErrClickInFlight)
	})
}

// acquire_user/4: "it is dated back by ttl_s - hold_s, so a turn takes it
// over hold_s after it was taken (or last kept, keep_user/4), should it
// never be released (its node went down)."
func TestAcquireUser_DatedBack_TurnTakesOverHoldAfterTakenOrLastKept(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		click := turns.ClickRef()
		lease, err := c.node(0).AcquireUser(t.Context(), "7", click, ttl, hold)
		must(t, err)
		if lease.Ref() != click || len(lease.Names()) != 1 || lease.Name() != "user/7" || lease.Token() == 0 {
			t.Fatalf("the click's lease: ref %q, locks %v, token %d", lease.Ref(), lease.Names(), lease.Token())
		}
		st, err := lease.Status(t.Context())
		must(t, err)
		if age := st.Now.Sub(st.Renewed); age < ttl-hold || age >= ttl {
			t.Fatalf("a new click's lock is %v old, want dated back by %v", age, ttl-hold)
		}
		c.advance(20 * time.Second)
		kept, err := c.node(0).KeepUser(t.Context(), "7", click, ttl, hold)
		wantBool(t, "KeepUser", kept, err, true)
		c.crash(0)
		c.advance(hold - time.Second) // 49 s after it was taken, 29 s after it was kept
		wantErr(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-a")), turns.ErrClickInFlight)
		c.advance(2 * time.Second)
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-a")))
	})
}

// acquire_user/4: "Released with release_user/2."
func TestAcquireUser_ReleasedWithReleaseUser(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		click := turns.ClickRef()
		must(t, second(c.node(0).AcquireUser(t.Context(), "7", click, ttl, hold)))
		must(t, c.node(0).ReleaseUser(t.Context(), "7", click))
		if c.holder("user/7") != "" {
			t.Fatal("ReleaseUser left the click's lock")
		}
		must(t, second(c.node(1).Acquire(t.Context(), "1", "7", "turn-a")))
	})
}

// click_ref/0: "A new ref for a click on a confirmation card, told apart
// from a turn's."
func TestClickRef_NewRefToldApartFromTurns(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		seen := map[string]bool{}
		for range 1000 {
			r := turns.ClickRef()
			if seen[r] {
				t.Fatalf("ClickRef repeated %q", r)
			}
			seen[r] = true
			if k, err := turns.KindOf(r); err != nil || k != turns.KindClick {
				t.Fatalf("KindOf(%q) = %q, %v", r, k, err)
			}
		}
		for _, r := range []string{"turn-1", "0b6f4a5e-8d0c-4c43-9d3e-2d1f0c4c6a11", "click", "clicks:1"} {
			if k, err := turns.KindOf(r); err != nil || k != turns.KindTurn {
				t.Fatalf("KindOf(%q) = %q, %v", r, k, err)
			}
		}
		// Where the kind matters, the wrong one is refused and changes nothing.
		tu := c.node(0)
		wantErr(t, second(tu.Acquire(t.Context(), "1", "7", turns.ClickRef())), sleeplock.ErrInvalidRef)
		wantErr(t, second(tu.AcquireUser(t.Context(), "7", "turn-1", ttl, hold)), sleeplock.ErrInvalidRef)
		if c.holder("chat/1") != "" || c.holder("user/7") != "" {
			t.Fatal("a refused ref changed a lock")
		}
	})
}

// fresh?/3: "Whether the chat's lock is turn_ref's and younger than ttl_s
// (the database's clock): the turn may still run, on this node or another."
func TestFresh_ChatLockIsTurnRefsAndYoungerThanTTL(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-a")))
		for i := range 2 { // asked on the turn's node or another
			fresh, err := c.node(i).Fresh(ctx, "1", "turn-a", ttl)
			wantBool(t, "Fresh of the holder", fresh, err, true)
			fresh, err = c.node(i).Fresh(ctx, "1", "turn-b", ttl)
			wantBool(t, "Fresh of another turn", fresh, err, false)
			fresh, err = c.node(i).Fresh(ctx, "2", "turn-a", ttl)
			wantBool(t, "Fresh in another chat", fresh, err, false)
		}
		c.advance(2 * time.Minute)
		fresh, err := c.node(1).Fresh(ctx, "1", "turn-a", time.Minute)
		wantBool(t, "Fresh older than a shorter ttl", fresh, err, false)
		fresh, err = c.node(1).Fresh(ctx, "1", "turn-a", ttl)
		wantBool(t, "Fresh younger than ttl", fresh, err, true)
		c.advance(ttl)
		fresh, err = c.node(1).Fresh(ctx, "1", "turn-a", ttl)
		wantBool(t, "Fresh older than ttl (not yet taken over)", fresh, err, false)
	})
}

// held?/3: "Whether turn_ref holds both locks."
func TestHeld_WhetherTurnRefHoldsBothLocks(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-a")))
		ok, err := c.node(1).Held(ctx, "1", "7", "turn-a")
		wantBool(t, "Held of the holder", ok, err, true)
		ok, err = c.node(1).Held(ctx, "1", "7", "turn-b")
		wantBool(t, "Held of another ref", ok, err, false)
		ok, err = c.node(1).Held(ctx, "1", "8", "turn-a")
		wantBool(t, "Held with another user", ok, err, false)
		// Only the chat's lock left: not both.
		c.advance(ttl + time.Second)
		must(t, second(c.node(1).AcquireUser(ctx, "7", turns.ClickRef(), ttl, hold)))
		ok, err = c.node(0).Held(ctx, "1", "7", "turn-a")
		wantBool(t, "Held with the user's lock taken over", ok, err, false)
		if c.holder("chat/1") != "turn-a" {
			t.Fatal("the chat's lock changed")
		}
	})
}

// keep_user/4: "Dates the user's lock of ref as if taken now (with
// acquire_user/4's ttl_s and hold_s), while ref still holds it:"
func TestKeepUser_DatesUsersLockAsIfTakenNowWhileRefHoldsIt(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		click := turns.ClickRef()
		lease, err := c.node(0).AcquireUser(ctx, "7", click, ttl, hold)
		must(t, err)
		c.advance(25 * time.Second)
		kept, err := c.node(1).KeepUser(ctx, "7", click, ttl, hold) // from any node
		wantBool(t, "KeepUser", kept, err, true)
		st, err := lease.Status(ctx)
		must(t, err)
		if age := st.Now.Sub(st.Renewed); age < ttl-hold || age >= ttl-hold+time.Second {
			t.Fatalf("a kept click's lock is %v old, want %v (as if taken now)", age, ttl-hold)
		}
		// Another ref keeps nothing and changes nothing.
		kept, err = c.node(1).KeepUser(ctx, "7", turns.ClickRef(), ttl, ttl)
		wantBool(t, "KeepUser by another ref", kept, err, false)
		c.advance(hold + time.Second)
		must(t, second(c.node(1).Acquire(ctx, "1", "7", "turn-a")))
		// ref no longer holds it: nothing changes.
		kept, err = c.node(0).KeepUser(ctx, "7", click, ttl, hold)
		wantBool(t, "KeepUser after takeover", kept, err, false)
		ok, err := c.node(1).Held(ctx, "1", "7", "turn-a")
		wantBool(t, "the turn's Held", ok, err, true)
	})
}

// keep_user/4: "true when ref held it."
func TestKeepUser_TrueWhenRefHeldIt(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		tu := c.node(0)
		click := turns.ClickRef()
		kept, err := tu.KeepUser(ctx, "7", click, ttl, hold)
		wantBool(t, "KeepUser before the click", kept, err, false)
		must(t, second(tu.AcquireUser(ctx, "7", click, ttl, hold)))
		kept, err = tu.KeepUser(ctx, "7", click, ttl, hold)
		wantBool(t, "KeepUser while held", kept, err, true)
		must(t, tu.ReleaseUser(ctx, "7", click))
		kept, err = tu.KeepUser(ctx, "7", click, ttl, hold)
		wantBool(t, "KeepUser after release", kept, err, false)
		if c.holder("user/7") != "" {
			t.Fatal("KeepUser after release took the lock")
		}
	})
}

// release/3: "Releases both locks if turn_ref still holds them."
func TestRelease_BothLocksIfTurnRefStillHoldsThem(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-a")))
		must(t, c.node(0).Release(ctx, "1", "7", "turn-a"))
		if c.holder("chat/1") != "" || c.holder("user/7") != "" {
			t.Fatal("Release left a lock")
		}
		wantErr(t, c.node(0).Release(ctx, "1", "7", "turn-a"), sleeplock.ErrNotHeld) // again: nothing freed, and told so
		// One lock taken over: the other is released, the new holder kept.
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-b")))
		c.advance(ttl + time.Second)
		click := turns.ClickRef()
		must(t, second(c.node(1).AcquireUser(ctx, "7", click, ttl, hold)))
		wantErr(t, c.node(0).Release(ctx, "1", "7", "turn-b"), sleeplock.ErrNotHeld) // freed only the chat's
		if c.holder("chat/1") != "" || c.holder("user/7") != click {
			t.Fatalf("after a partial release: chat %q, user %q", c.holder("chat/1"), c.holder("user/7"))
		}
	})
}

// release_stale/4: "Releases the locks of turn_ref only while the chat's
// lock is still its and older than ttl_s (the database's clock): what is
// left of a turn lost with its node."
func TestReleaseStale_OnlyWhileChatLockStillItsAndOlderThanTTL(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-a")))
		c.crash(0)
		ok, err := c.node(1).ReleaseStale(ctx, "1", "7", "turn-a", ttl)
		wantBool(t, "ReleaseStale of a fresh turn", ok, err, false)
		c.advance(ttl - time.Second)
		ok, err = c.node(1).ReleaseStale(ctx, "1", "7", "turn-a", ttl)
		wantBool(t, "ReleaseStale before the TTL", ok, err, false)
		ok, err = c.node(1).ReleaseStale(ctx, "1", "7", "turn-x", time.Minute)
		wantBool(t, "ReleaseStale of another ref", ok, err, false)
		if c.holder("chat/1") != "turn-a" || c.holder("user/7") != "turn-a" {
			t.Fatal("a refused ReleaseStale changed a lock")
		}
		c.advance(2 * time.Second)
		ok, err = c.node(1).ReleaseStale(ctx, "1", "7", "turn-a", ttl)
		wantBool(t, "ReleaseStale after the TTL", ok, err, true)
		if c.holder("chat/1") != "" || c.holder("user/7") != "" {
			t.Fatal("ReleaseStale left a lock")
		}
		// The chat's lock no longer its (taken over by a newer turn): nothing.
		must(t, second(c.node(1).Acquire(ctx, "2", "8", "turn-b")))
		c.advance(ttl + time.Second)
		must(t, second(c.node(1).Acquire(ctx, "2", "9", "turn-c")))
		ok, err = c.node(1).ReleaseStale(ctx, "2", "8", "turn-b", ttl)
		wantBool(t, "ReleaseStale of a turn taken over", ok, err, false)
		if c.holder("chat/2") != "turn-c" || c.holder("user/8") != "turn-b" {
			t.Fatalf("chat/2 %q, user/8 %q", c.holder("chat/2"), c.holder("user/8"))
		}
	})
}

// release_stale/4: "true when this call released it, so of two callers at
// most one does;"
func TestReleaseStale_TrueOnlyForTheCallThatReleased_AtMostOneOfTwoCallers(t *testing.T) {
	each(t, 3, func(t *testing.T, c *cluster) {
		must(t, second(c.node(0).Acquire(t.Context(), "1", "7", "turn-a")))
		c.crash(0)
		c.advance(ttl + time.Second)
		var wg sync.WaitGroup
		wins := make([]bool, 8)
		for i := range wins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := c.node(1+i%2).ReleaseStale(t.Context(), "1", "7", "turn-a", ttl)
				if err != nil {
					t.Error(err)
				}
				wins[i] = ok
			}()
		}
		wg.Wait()
		n := 0
		for _, w := range wins {
			if w {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d callers got true, want exactly 1", n)
		}
	})
}

// release_stale/4: "the user's lock goes too, if turn_ref still holds it."
func TestReleaseStale_UsersLockGoesTooIfTurnRefStillHoldsIt(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-a")))
		must(t, second(c.node(0).Acquire(ctx, "2", "8", "turn-b")))
		c.crash(0)
		c.advance(ttl + time.Second)
		// user/8 was taken over by a click meanwhile.
		click := turns.ClickRef()
		must(t, second(c.node(1).AcquireUser(ctx, "8", click, ttl, hold)))
		ok, err := c.node(1).ReleaseStale(ctx, "1", "7", "turn-a", ttl)
		wantBool(t, "ReleaseStale", ok, err, true)
		if c.holder("user/7") != "" {
			t.Fatal("the user's lock stayed")
		}
		ok, err = c.node(1).ReleaseStale(ctx, "2", "8", "turn-b", ttl)
		wantBool(t, "ReleaseStale", ok, err, true)
		if c.holder("chat/2") != "" || c.holder("user/8") != click {
			t.Fatalf("chat/2 %q, user/8 %q", c.holder("chat/2"), c.holder("user/8"))
		}
	})
}

// release_user/2: "Releases the user's lock if ref still holds it."
func TestReleaseUser_ReleasesUsersLockIfRefStillHoldsIt(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		click := turns.ClickRef()
		must(t, second(c.node(0).AcquireUser(ctx, "7", click, ttl, hold)))
		wantErr(t, c.node(1).ReleaseUser(ctx, "7", turns.ClickRef()), sleeplock.ErrNotHeld)
		if c.holder("user/7") != click {
			t.Fatal("another click's ReleaseUser freed the lock")
		}
		c.advance(hold + time.Second)
		must(t, second(c.node(1).Acquire(ctx, "1", "7", "turn-a")))
		wantErr(t, c.node(0).ReleaseUser(ctx, "7", click), sleeplock.ErrNotHeld) // late: nothing freed, and told so
		if c.holder("user/7") != "turn-a" {
			t.Fatal("a late ReleaseUser freed a turn's lock")
		}
	})
}

// Bad input — empty chat or user ids, a hold longer than the TTL, a ref that
// is neither a turn's nor a click's where the kind matters — is a typed
// error, and nothing changes.
func TestBadInput_TypedErrorsNothingChanged(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		tu := c.node(0)
		must(t, second(tu.Acquire(ctx, "1", "7", "turn-a")))
		click := turns.ClickRef()
		must(t, second(tu.AcquireUser(ctx, "8", click, ttl, hold)))
		long := string(make([]byte, 300))
		cases := []struct {
			name string
			err  error
			kind error
		}{
			{"Acquire empty chat", second(tu.Acquire(ctx, "", "9", "turn-b")), sleeplock.ErrInvalidName},
			{"Acquire empty user", second(tu.Acquire(ctx, "2", "", "turn-b")), sleeplock.ErrInvalidName},
			{"Acquire empty ref", second(tu.Acquire(ctx, "2", "9", "")), sleeplock.ErrInvalidRef},
			{"Acquire click ref", second(tu.Acquire(ctx, "2", "9", turns.ClickRef())), sleeplock.ErrInvalidRef},
			{"Acquire forged click ref", second(tu.Acquire(ctx, "2", "9", "click:42")), sleeplock.ErrInvalidRef},
			{"Acquire control char", second(tu.Acquire(ctx, "2", "9", "turn\n")), sleeplock.ErrInvalidRef},
			{"Acquire long ref", second(tu.Acquire(ctx, "2", "9", long)), sleeplock.ErrInvalidRef},
			{"Acquire family chat", second(tu.Acquire(ctx, "*", "9", "turn-b")), sleeplock.ErrInvalidName},
			{"AcquireUser empty user", second(tu.AcquireUser(ctx, "", turns.ClickRef(), ttl, hold)), sleeplock.ErrInvalidName},
			{"AcquireUser turn ref", second(tu.AcquireUser(ctx, "9", "turn-b", ttl, hold)), sleeplock.ErrInvalidRef},
			{"AcquireUser hold > ttl", second(tu.AcquireUser(ctx, "9", turns.ClickRef(), hold, ttl)), sleeplock.ErrInvalidHold},
			{"AcquireUser zero hold", second(tu.AcquireUser(ctx, "9", turns.ClickRef(), ttl, 0)), sleeplock.ErrInvalidHold},
			{"AcquireUser zero ttl", second(tu.AcquireUser(ctx, "9", turns.ClickRef(), 0, 0)), sleeplock.ErrInvalidTTL},
			{"KeepUser hold > ttl", second(tu.KeepUser(ctx, "8", click, hold, ttl)), sleeplock.ErrInvalidHold},
			{"KeepUser empty ref", second(tu.KeepUser(ctx, "8", "", ttl, hold)), sleeplock.ErrInvalidRef},
			{"Fresh empty chat", second(tu.Fresh(ctx, "", "turn-a", ttl)), sleeplock.ErrInvalidName},
			{"Fresh zero ttl", second(tu.Fresh(ctx, "1", "turn-a", 0)), sleeplock.ErrInvalidTTL},
			{"Fresh click ref", second(tu.Fresh(ctx, "1", click, ttl)), sleeplock.ErrInvalidRef},
			{"Held empty user", second(tu.Held(ctx, "1", "", "turn-a")), sleeplock.ErrInvalidName},
			{"Release empty chat", tu.Release(ctx, "", "7", "turn-a"), sleeplock.ErrInvalidName},
			{"Release click ref", tu.Release(ctx, "1", "8", click), sleeplock.ErrInvalidRef},
			{"ReleaseStale zero ttl", second(tu.ReleaseStale(ctx, "1", "7", "turn-a", 0)), sleeplock.ErrInvalidTTL},
			{"ReleaseStale empty user", second(tu.ReleaseStale(ctx, "1", "", "turn-a", ttl)), sleeplock.ErrInvalidName},
			{"ReleaseUser empty user", tu.ReleaseUser(ctx, "", click), sleeplock.ErrInvalidName},
			{"ReleaseUser empty ref", tu.ReleaseUser(ctx, "8", ""), sleeplock.ErrInvalidRef},
		}
		for _, tc := range cases {
			var inv *sleeplock.InvalidError
			if !errors.As(tc.err, &inv) || !errors.Is(tc.err, tc.kind) || !errors.Is(tc.err, sleeplock.ErrInvalid) {
				t.Errorf("%s: %v, want an *InvalidError matching %v", tc.name, tc.err, tc.kind)
			}
		}
		if c.holder("chat/1") != "turn-a" || c.holder("user/7") != "turn-a" || c.holder("user/8") != click ||
			c.holder("chat/2") != "" || c.holder("user/9") != "" {
			t.Fatal("bad input changed a lock")
		}
		// A bad option makes every call fail.
		bad := turns.New(c.locks[0], turns.WithTTL(0))
		wantErr(t, bad.Define(ctx), sleeplock.ErrInvalidTTL)
		wantErr(t, second(bad.Acquire(ctx, "3", "3", "turn-c")), sleeplock.ErrInvalidTTL)
		wantErr(t, turns.New(c.locks[0], turns.WithUserFamily("chat")).Define(ctx), sleeplock.ErrInvalidConfig)
		wantErr(t, turns.New(c.locks[0], turns.WithChatFamily("")).Define(ctx), sleeplock.ErrInvalidName)
	})
}

func second[T any](_ T, err error) error { return err }

// Not a sentence of the reference: acquiring again with a turn's ref that holds
// both locks changes nothing; one that holds only one of them is refused
// (the reference's statement refuses a lock that is neither free nor stale).
func TestAcquire_SameTurnRefAgain(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		tu := c.node(0)
		first, err := tu.Acquire(ctx, "1", "7", "turn-a")
		must(t, err)
		again, err := tu.Acquire(ctx, "1", "7", "turn-a")
		must(t, err)
		if first.Reentered() || !again.Reentered() {
			t.Fatalf("Reentered: first %v, again %v", first.Reentered(), again.Reentered())
		}
		if len(again.Tokens()) != 2 || again.Tokens()[0] != first.Tokens()[0] || again.Tokens()[1] != first.Tokens()[1] {
			t.Fatalf("tokens %v, were %v", again.Tokens(), first.Tokens())
		}
		must(t, tu.ReleaseUser(ctx, "7", "turn-a"))
		wantErr(t, second(tu.Acquire(ctx, "1", "7", "turn-a")), turns.ErrConversationBusy)
		if c.holder("user/7") != "" {
			t.Fatal("a refused Acquire took the user's lock")
		}
		ok, err := tu.Held(ctx, "1", "7", "turn-a")
		wantBool(t, "Held", ok, err, false)
		wantErr(t, tu.Release(ctx, "1", "7", "turn-a"), sleeplock.ErrNotHeld) // freed the chat's only
		if c.holder("chat/1") != "" || c.holder("user/7") != "" {
			t.Fatalf("after Release: chat %q, user %q", c.holder("chat/1"), c.holder("user/7"))
		}
	})
}

// Issue 7 item 12: after Acquire("1","7","turn-a"), the same turn ref asking
// for another chat of the same user is refused: the user's lock is neither
// free nor stale, whoever holds it.
func TestAcquire_TurnRefCannotTakeASecondChat(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		tu := c.node(0)
		must(t, second(tu.Acquire(ctx, "1", "7", "turn-a")))
		err := second(tu.Acquire(ctx, "2", "7", "turn-a"))
		wantErr(t, err, turns.ErrTurnInFlight)
		var busy *sleeplock.BusyError
		if !errors.As(err, &busy) || busy.Lock != "user/7" || busy.Kind != turns.KindTurn {
			t.Fatalf("refusal %v", err)
		}
		if c.holder("chat/2") != "" {
			t.Fatalf("the refused turn took chat/2 (held by %q)", c.holder("chat/2"))
		}
		must(t, tu.Release(ctx, "1", "7", "turn-a"))
	})
}

// Issue 7 item 13: the acquirer's TTL decides a takeover, as the reference's
// "busy_since < now - ttl_s": a click with a TTL of 1 s takes over a turn
// lock 1.1 s old, though the turn was taken with a TTL of 4 s.
func TestAcquireUser_AcquirersTTLDecidesTakeover(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		short := turns.New(c.locks[0], turns.WithTTL(4*time.Second))
		must(t, second(short.Acquire(ctx, "1", "7", "turn-a")))
		c.advance(1100 * time.Millisecond)
		click := turns.ClickRef()
		wantErr(t, second(short.AcquireUser(ctx, "7", click, 2*time.Second, time.Second)), turns.ErrTurnInFlight)
		must(t, second(short.AcquireUser(ctx, "7", click, time.Second, time.Second)))
		if c.holder("user/7") != click {
			t.Fatalf("user/7 held by %q", c.holder("user/7"))
		}
		// And a turn with a TTL longer than the click's waits for its own TTL.
		long := turns.New(c.locks[0], turns.WithTTL(time.Minute))
		c.advance(10 * time.Second) // the click is past its own TTL (1 s)…
		wantErr(t, second(long.Acquire(ctx, "2", "7", "turn-b")), turns.ErrClickInFlight)
		c.advance(time.Minute) // …and now older than the turn's.
		must(t, second(long.Acquire(ctx, "2", "7", "turn-b")))
	})
}

// "Each is taken by one atomic statement …" (issue 20 item 1): Acquire is
// one call of the store, granted or refused — also when the ref holds one
// of the two locks and is refused for it — and reads nothing first.
func TestEachTakenByOneAtomicStatement(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		cs := &countingStore{Store: c.locks[0].Store()}
		tu := turns.New(sleeplock.New(cs), turns.WithTTL(ttl))
		one := func(what string, err, want error) {
			t.Helper()
			if want == nil {
				must(t, err)
			} else {
				wantErr(t, err, want)
			}
			if got := cs.take(); len(got) != 1 || got[0] != "Acquire" {
				t.Fatalf("%s: store calls %v, want one Acquire", what, got)
			}
		}
		one("granted", second(tu.Acquire(ctx, "1", "7", "turn-a")), nil)
		one("again, holding both", second(tu.Acquire(ctx, "1", "7", "turn-a")), nil)
		one("same chat", second(tu.Acquire(ctx, "1", "8", "turn-b")), turns.ErrConversationBusy)
		one("same user", second(tu.Acquire(ctx, "2", "7", "turn-b")), turns.ErrTurnInFlight)
		// turn-a holds the chat's lock alone now: refused for it.
		must(t, c.node(0).ReleaseUser(ctx, "7", "turn-a"))
		one("holding the chat's only", second(tu.Acquire(ctx, "1", "7", "turn-a")), turns.ErrConversationBusy)
		// turn-x holds the user's lock alone: refused for it.
		must(t, second(c.node(0).Acquire(ctx, "5", "9", "turn-x")))
		chat, err := c.locks[0].LeaseOf("turn-x", []string{"chat/5"})
		must(t, err)
		must(t, chat.Release(ctx))
		err = second(tu.Acquire(ctx, "6", "9", "turn-x"))
		one("holding the user's only", err, turns.ErrTurnInFlight)
		var busy *sleeplock.BusyError
		if !errors.As(err, &busy) || busy.Lock != "user/9" || busy.Kind != turns.KindTurn {
			t.Fatalf("refusal %v, want user/9 held by a turn", err)
		}
		if c.holder("chat/6") != "" || c.holder("user/7") != "" {
			t.Fatal("a refused Acquire took a lock")
		}
	})
}

// held?/3: "Whether turn_ref holds both locks." (issue 20 item 2): once the
// TTL has passed and nobody took the locks over, the turn still holds them;
// "a turn whose lock was taken over stops there".
func TestHeld_TrueAfterTTLUntilTakenOver(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		must(t, second(c.node(0).Acquire(ctx, "1", "7", "turn-a")))
		c.advance(ttl + time.Second)
		for i := range 2 {
			ok, err := c.node(i).Held(ctx, "1", "7", "turn-a")
			wantBool(t, "Held past the TTL, not taken over", ok, err, true)
		}
		must(t, second(c.node(1).Acquire(ctx, "1", "8", "turn-b")))
		ok, err := c.node(0).Held(ctx, "1", "7", "turn-a")
		wantBool(t, "Held once the chat's lock was taken over", ok, err, false)
	})
}

// fresh?/3: "Whether the chat's lock is turn_ref's and younger than ttl_s"
// (issue 20 item 3): a chat lock past its own TTL, not taken over, 2 s old,
// is fresh for a ttl of an hour.
func TestFresh_PastItsOwnTTLNotTakenOver(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		short := turns.New(c.locks[0], turns.WithTTL(time.Second))
		must(t, second(short.Acquire(ctx, "1", "7", "turn-a")))
		c.advance(2 * time.Second)
		fresh, err := c.node(1).Fresh(ctx, "1", "turn-a", time.Hour)
		wantBool(t, "Fresh(ttl 1h) of a lock 2 s old past its own TTL", fresh, err, true)
		fresh, err = c.node(1).Fresh(ctx, "1", "turn-a", time.Second)
		wantBool(t, "Fresh(ttl 1s) of a lock 2 s old", fresh, err, false)
	})
}

// Issue 20 item 4: one model of a turn past its TTL that nobody took over,
// the same in every call. It still names its turn: Held reports it,
// marked expired, and so does State, apart from the running ones; Keep
// revives it; Release frees it; any acquirer takes it at once.
func TestExpiredTurnNotTakenOver_OneModel(t *testing.T) {
	each(t, 2, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		a, err := c.node(0).Acquire(ctx, "1", "7", "turn-a")
		must(t, err)
		c.advance(ttl + time.Second)
		st, err := a.Status(ctx)
		must(t, err)
		if !st.Held || !st.Expired {
			t.Fatalf("Status past the TTL: %+v, want held, expired", st)
		}
		for _, name := range []string{"chat/1", "user/7"} {
			if s := c.state(name); s.Running != 0 || s.Expired != 1 || len(s.Holders) != 1 || s.Holders[0].Ref != "turn-a" {
				t.Fatalf("State of %s: %+v, want one expired holder, turn-a", name, s)
			}
		}
		// Release frees it: nil, not ErrNotHeld.
		must(t, c.node(1).Release(ctx, "1", "7", "turn-a"))
		if c.holder("chat/1") != "" || c.holder("user/7") != "" {
			t.Fatal("Release of an expired turn left a lock")
		}
		// Keep revives it.
		b, err := c.node(0).Acquire(ctx, "1", "7", "turn-b")
		must(t, err)
		c.advance(ttl + time.Second)
		must(t, b.Keep(ctx))
		if st, err := b.Status(ctx); err != nil || !st.Held || st.Expired {
			t.Fatalf("Status after Keep: %+v %v, want held, live", st, err)
		}
		wantErr(t, second(c.node(1).Acquire(ctx, "1", "8", "turn-c")), turns.ErrConversationBusy)
		// Any acquirer takes it at once.
		c.advance(ttl + time.Second)
		must(t, second(c.node(1).Acquire(ctx, "1", "8", "turn-c")))
		ok, err := c.node(0).Held(ctx, "1", "7", "turn-b")
		wantBool(t, "Held once taken over", ok, err, false)
		wantErr(t, c.node(0).Release(ctx, "1", "7", "turn-b"), sleeplock.ErrNotHeld)
	})
}

// Issue 20 item 4: the turn's own lease ends (Done) at its expiry, because
// it cannot know whether another turn took it over; the locks still name
// the turn until one does.
func TestExpiredTurnNotTakenOver_DoneClosesAtExpiry(t *testing.T) {
	each(t, 1, func(t *testing.T, c *cluster) {
		ctx := t.Context()
		const short = 100 * time.Millisecond
		tu := turns.New(c.locks[0], turns.WithTTL(short))
		a, err := tu.Acquire(ctx, "1", "7", "turn-a")
		must(t, err)
		c.advance(short)
		select {
		case <-a.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the turn's Done did not close at its expiry")
		}
		wantErr(t, context.Cause(a.Context()), sleeplock.ErrLeaseLost)
		ok, err := tu.Held(ctx, "1", "7", "turn-a")
		wantBool(t, "Held after Done, not taken over", ok, err, true)
	})
}

// countingStore records the calls made to a store.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	calls []string
}

func (s *countingStore) record(name string) {
	s.mu.Lock()
	s.calls = append(s.calls, name)
	s.mu.Unlock()
}

// take returns the calls recorded since the last take.
func (s *countingStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

func (s *countingStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	s.record("Acquire")
	return s.Store.Acquire(ctx, req)
}

func (s *countingStore) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	s.record("Held")
	return s.Store.Held(ctx, h)
}

func (s *countingStore) State(ctx context.Context, name string, detail bool) (store.State, error) {
	s.record("State")
	return s.Store.State(ctx, name, detail)
}

func (s *countingStore) List(ctx context.Context, detail bool) ([]store.State, error) {
	s.record("List")
	return s.Store.List(ctx, detail)
}

func (s *countingStore) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	s.record("Release")
	return s.Store.Release(ctx, h, ev)
}

func (s *countingStore) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	s.record("Keep")
	return s.Store.Keep(ctx, h, ttl, hold)
}
