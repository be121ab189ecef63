package chaos

import (
	"testing"
	"time"
)

// The election run's checker finds what it must: a write of an older term
// after a newer one, and a command that ran on after the next term's
// command started while both elects lived; it does not count a command
// that ran on after its elect was killed, nor the kill's takeover wrongly.
func TestAnalyzeElection(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	line := func(ms int, ev string, token int64, elect int) ledgerLine {
		return ledgerLine{at: at(ms), event: ev, token: token, cand: "c", pid: 100 + int(token), ppid: elect}
	}
	clean := []ledgerLine{
		line(0, evStart, 1, 10), line(10, evWrite, 1, 10), line(20, evEnd, 1, 10),
		line(30, evStart, 2, 20), line(40, evWrite, 2, 20), line(50, evEnd, 2, 20),
	}

	var rep ElectionReport
	analyze(&rep, []int64{1, 2}, clean, nil)
	if rep.StaleWrites != 0 || len(rep.Overlaps) != 0 || rep.Terms != 2 || rep.Writes != 2 {
		t.Fatalf("a clean run: %+v", rep)
	}

	rep = ElectionReport{}
	analyze(&rep, []int64{1, 2, 1}, clean, nil)
	if rep.StaleWrites != 1 {
		t.Fatalf("token 1 written after token 2: %d stale writes, want 1", rep.StaleWrites)
	}

	overlap := append(clean[:len(clean):len(clean)], line(35, evRefused, 1, 10))
	rep = ElectionReport{}
	analyze(&rep, []int64{1, 2}, overlap, nil)
	if len(rep.Overlaps) != 1 {
		t.Fatalf("term 1's command ran after term 2's started: %d overlaps, want 1", len(rep.Overlaps))
	}

	rep = ElectionReport{}
	analyze(&rep, []int64{1, 2}, overlap, map[int]time.Time{10: at(25)})
	if len(rep.Overlaps) != 0 {
		t.Fatalf("term 1's elect was killed before term 2 began: %v, want no overlap", rep.Overlaps)
	}
	if len(rep.Takeovers) != 1 || rep.Takeovers[0] != 5*time.Millisecond {
		t.Fatalf("takeovers %v, want [5ms] (the kill at 25ms, term 2 at 30ms)", rep.Takeovers)
	}
}
