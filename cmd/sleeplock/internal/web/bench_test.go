package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
)

// BenchmarkList10000 is a page of GET /api/locks among 10,000 locks (1,000
// of them held): the first 100, and a prefix filter.
func BenchmarkList10000(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, Config{})
	for i := range 10_000 {
		name := fmt.Sprintf("job/%05d", i)
		must(b, e.locks.Define(ctx, name, 2))
		if i%10 == 0 {
			_, err := e.locks.Acquire(ctx, name)
			must(b, err)
		}
	}
	for _, path := range []string{"/api/locks?limit=100", "/api/locks?prefix=job/0999&limit=100", "/api/locks"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				e.srv.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
