package chaos

import (
	"slices"
	"testing"
	"time"
)

// TestRedisChecks: the checker of the Redis resources counts each write
// whose token is lower than the one before it, and each write the ledger
// has that the list lacks; nothing else.
func TestRedisChecks(t *testing.T) {
	for _, c := range []struct {
		tokens []int64
		want   int64
	}{
		{nil, 0},
		{[]int64{1, 1, 1, 2, 5, 5}, 0},
		{[]int64{1, 3, 2, 4}, 1},
		{[]int64{5, 4, 3, 3, 9, 1}, 3},
	} {
		if got := backwards(c.tokens); got != c.want {
			t.Errorf("backwards(%v) = %d, want %d", c.tokens, got, c.want)
		}
	}
	for _, c := range []struct {
		ledger map[int64]int64
		tokens []int64
		want   int64
	}{
		{nil, []int64{1, 2}, 0},                            // written, never acknowledged: not lost
		{map[int64]int64{1: 2, 2: 1}, []int64{1, 1, 2}, 0}, // all there
		{map[int64]int64{1: 3, 2: 1}, []int64{1, 7}, 3},    // two of 1 and the 2
	} {
		if got := missing(c.ledger, c.tokens); got != c.want {
			t.Errorf("missing(%v, %v) = %d, want %d", c.ledger, c.tokens, got, c.want)
		}
	}
}

// TestClientIDs: the connections of one worker are found by their name in
// CLIENT LIST, and no other.
func TestClientIDs(t *testing.T) {
	list := "id=3 addr=127.0.0.1:50 laddr=127.0.0.1:6391 fd=8 name=app-w1 age=2 db=0 cmd=evalsha\n" +
		"id=4 addr=127.0.0.1:51 laddr=127.0.0.1:6391 fd=9 name=app-w10 age=2 db=0 cmd=subscribe\n" +
		"id=7 addr=127.0.0.1:52 laddr=127.0.0.1:6391 fd=10 name=app-w1 age=1 db=0 cmd=subscribe\n" +
		"id=9 addr=127.0.0.1:53 laddr=127.0.0.1:6391 fd=11 name= age=1 db=0 cmd=client|list\n"
	if got, want := clientIDs(list, "app-w1"), []string{"3", "7"}; !slices.Equal(got, want) {
		t.Errorf("clientIDs = %v, want %v", got, want)
	}
}

// TestRedisTime: the TIME of a fenced write is read from the Tx's first
// result, and anything else is an error.
func TestRedisTime(t *testing.T) {
	got, err := redisTime([]any{[]any{"1700000000", "250"}, int64(3)})
	if want := time.Unix(1700000000, 250000); err != nil || !got.Equal(want) {
		t.Errorf("redisTime = %v, %v, want %v", got, err, want)
	}
	for _, bad := range [][]any{nil, {"OK"}, {[]any{"x", "1"}}} {
		if _, err := redisTime(bad); err == nil {
			t.Errorf("redisTime(%v): no error", bad)
		}
	}
}
