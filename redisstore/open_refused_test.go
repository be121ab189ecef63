package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/redisstore"
)

// redisLog collects what go-redis logs through its process-wide logger.
type redisLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *redisLog) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

// stderrLog is go-redis's default logger, put back after a test.
type stderrLog struct{ l *log.Logger }

func (s stderrLog) Printf(_ context.Context, format string, v ...any) { s.l.Printf(format, v...) }

// A refused connection is an answer: Open of a port nobody listens on
// returns one error, matching ECONNREFUSED, and go-redis logs nothing
// (before, it retried for some five seconds and logged twelve lines).
func TestOpenRefusedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nobody listens there now: connections are refused
	var logged redisLog
	redis.SetLogger(&logged)
	t.Cleanup(func() { redis.SetLogger(stderrLog{log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)}) })
	s, err := redisstore.Open(t.Context(), "redis://"+addr+"/0")
	if err == nil {
		_ = s.Close()
		t.Fatalf("Open of %s, where nobody listens: no error", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.HasPrefix(err.Error(), "redisstore: ") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open of a refused port: %v; want redisstore's error naming %s, matching ECONNREFUSED", err, addr)
	}
	logged.mu.Lock()
	defer logged.mu.Unlock()
	if len(logged.lines) != 0 {
		t.Fatalf("go-redis logged %d lines: %q", len(logged.lines), logged.lines)
	}
}
