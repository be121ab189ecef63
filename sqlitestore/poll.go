package sqlitestore

import (
	"context"
	"time"
)

// changes returns a channel closed at the next change this process makes
// or sees.
func (s *Store) changes() <-chan struct{} {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	return s.bcast
}

func (s *Store) notify() {
	s.bmu.Lock()
	close(s.bcast)
	s.bcast = make(chan struct{})
	s.bmu.Unlock()
}

// addWaiter counts a waiting caller and starts the change poller when it
// is the first.
func (s *Store) addWaiter() {
	s.bmu.Lock()
	s.nwait++
	s.bmu.Unlock()
	s.startPoller()
}

// startPoller starts the change poller unless it runs (or Close began).
func (s *Store) startPoller() {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	if !s.polling && !s.shut {
		s.polling = true
		s.pollWG.Add(1)
		go s.pollChanges()
	}
}

func (s *Store) removeWaiter() {
	s.bmu.Lock()
	s.nwait--
	s.bmu.Unlock()
}

// pollChanges reads PRAGMA data_version on a connection of its own while
// callers wait or holds are watched: it changes when another connection
// (this process's or another's) commits. Checks start every 250µs after a
// change and back off to the poll interval (watchPoll while it only has
// holds to watch). Waiters take the change channel before they start it
// (addWaiter), and it wakes them after its first read. After a change,
// while holds are watched, it reads the holds that other callers ended
// (readEnded), from the first row the table keeps on.
func (s *Store) pollChanges() {
	defer s.pollWG.Done()
	// The poller lingers a second after the last waiter left (or the last
	// watched hold ended), so that a lock taken in turns does not start
	// one per wait.
	idleSince := time.Time{}
	stop := func() bool { return s.pollIdle(&idleSince) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := s.db.Conn(ctx)
	if err != nil {
		s.bmu.Lock()
		s.polling = false
		s.bmu.Unlock()
		return
	}
	defer func() { _ = c.Close() }()
	const first = 250 * time.Microsecond
	d := first
	last := int64(-1)
	var endedID int64 // the last row of ended read
	unread := true    // the file changed since ended was last read
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-s.closing:
			stop()
			return
		case <-timer.C:
		case <-s.kick:
		}
		if stop() {
			return
		}
		watched := s.w.Len() > 0
		if s.near.Load() == 0 && s.nlisten.Load() == 0 && !watched {
			// Every waiter here is far from the head of its queue and
			// looks again on its own timer: nobody to wake.
			timer.Reset(slowPoll)
			continue
		}
		var v int64
		if err := c.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			d = s.cfg.poll
		} else if v != last {
			// Also at the first read: a change made before it went
			// unseen, so waiters check once more.
			s.notify()
			last, d, unread = v, first, true
		} else {
			d = min(d*2, s.cfg.poll)
		}
		if unread && watched {
			if id, err := s.readEnded(ctx, c, endedID); err == nil {
				endedID, unread = id, false
			}
		}
		switch {
		case s.near.Load() > 0:
		case s.nlisten.Load() > 0:
			d = max(d, slowPoll) // listeners only: no waiter to hand a slot
		default:
			d = max(d, watchPoll) // watched holds only
		}
		timer.Reset(d)
	}
}

// pollIdle reports whether the change poller ends: the store is closing, or
// it has had no waiter and no watched hold for a second (since *idleSince,
// which it sets and clears).
func (s *Store) pollIdle(idleSince *time.Time) bool {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	select {
	case <-s.closing:
		s.polling = false
		return true
	default:
	}
	switch {
	case s.nwait > 0 || s.w.Len() > 0:
		*idleSince = time.Time{}
	case idleSince.IsZero():
		*idleSince = time.Now()
	case time.Since(*idleSince) > time.Second:
		s.polling = false
		return true
	}
	return false
}
