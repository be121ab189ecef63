// Package integration is the root of the repository's test-only module:
// the tests that need several of its modules at once (a package on every
// store, a released module as a stranger fetches it). No library module
// requires this module, so none of its dependencies (the stores' drivers,
// the telemetry SDKs, golang.org/x/mod) reaches their users. It is never
// released.
//
//   - stores: the stores a cross-store test runs on (memory, SQLite,
//     PostgreSQL), one list for every package here.
//   - metrics: promevents and otelevents counting a known workload on
//     every store.
//   - turns: the behaviour of package turns, one test per sentence of its
//     reference, on every store and on several nodes.
//   - redispeer: the Redis store side by side with github.com/bsm/redislock
//     against one server (benchmarks only: issue 32's speed table).
//   - release: the release test (scripts/release's module proxy, and a
//     program outside the repository that fetches every module from it).
package integration
