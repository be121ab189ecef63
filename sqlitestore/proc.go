package sqlitestore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// A process is named by its pid, its start time (field 22 of
// /proc/PID/stat, clock ticks since boot) and its host: the boot id and the
// pid namespace. Two records of one host can be checked against /proc; a
// record of another host (another boot, another pid namespace, or a system
// without /proc) cannot, and then only its TTL bounds it.
type proc struct {
	pid    int
	start  int64
	host   string
	checks bool // this process can check pids of its host
}

var (
	selfOnce sync.Once
	selfProc proc
)

// self returns this process's identity.
func self() proc {
	selfOnce.Do(func() {
		selfProc = proc{pid: os.Getpid()}
		boot, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
		ns, err2 := os.Readlink("/proc/self/ns/pid")
		start, _, ok := startTime(selfProc.pid)
		if err1 != nil || err2 != nil || !ok {
			return // no /proc: pids are not checked
		}
		selfProc.start = start
		selfProc.host = strings.TrimSpace(string(boot)) + "/" + ns
		selfProc.checks = true
	})
	return selfProc
}

// startTime reads the start time of process pid and whether it has exited
// (a zombie not yet reaped by its parent); ok is false when /proc cannot
// tell.
func startTime(pid int) (start int64, exited, ok bool) {
	f := statFields(strconv.Itoa(pid))
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return 0, false, false
	}
	n, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return 0, false, false
	}
	return n, f[0] == "Z" || f[0] == "X", true
}

// statFields are the fields of /proc/PID/stat from the third (the state)
// on, or nil when it cannot be read. The command name (field 2) is in
// parentheses and may hold spaces or parentheses: fields are counted after
// its last ')'.
func statFields(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// groupLives reports whether a process of group pgrp, recorded on this
// host, still runs (a zombie has ended): a hold whose process is gone stays
// while it does (WithProcessGroup). When /proc cannot be read it cannot
// tell, and says so: the hold's TTL bounds it then.
func groupLives(me proc, pgrp int, host string) bool {
	if pgrp <= 0 || !me.checks || host != me.host {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgrp)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		// f[0] is field 3 (state), f[2] field 5 (pgrp).
		if f := statFields(e.Name()); len(f) > 2 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// gone reports whether the process of a record is known to have ended:
// recorded on this host (same boot, same pid namespace) and either no
// longer running or its pid now names a process started at another time.
// A record of another host is never known to be gone.
func gone(me proc, pid int, start int64, host string) bool {
	if !me.checks || host != me.host || pid <= 0 {
		return false
	}
	if pid == me.pid {
		return start != me.start
	}
	st, exited, ok := startTime(pid)
	if !ok {
		// Could not read it: gone only if the process does not exist.
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return errors.Is(err, fs.ErrNotExist)
	}
	return exited || st != start
}
