package cli

import (
	"bytes"
	"os"
	"strconv"
)

// othersInGroup reports whether a process of group pgid other than this
// one lives (zombies are dead), from /proc.
func othersInGroup(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: the caller waits its grace out
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid pgrp …": comm may hold anything but ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			return true
		}
	}
	return false
}
