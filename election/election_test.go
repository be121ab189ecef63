package election_test

import (
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
)

// An Election defines its lock on first use, and again after a Campaign
// found it gone (deleted, or lost with a store that keeps nothing across
// a restart): the next Campaign leads, with a greater token, as one of a
// new Election would.
func TestCampaignDefinesTheLockAgainOnceGone(t *testing.T) {
	ctx := t.Context()
	locks := sleeplock.New(nil)
	defer func() { _ = locks.Close() }()
	e, err := election.New(locks, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.Campaign(ctx, election.Candidate{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := locks.Delete(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, election.Candidate{ID: "a"}); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("a campaign in the deleted election: %v, want ErrNotFound", err)
	}
	next, err := e.Campaign(ctx, election.Candidate{ID: "a"})
	if err != nil {
		t.Fatalf("the campaign after it: %v, want a term", err)
	}
	defer func() { _ = next.Resign(ctx) }()
	if next.Token() <= first.Token() {
		t.Fatalf("token %d after the lock was defined again, not above %d", next.Token(), first.Token())
	}
}
