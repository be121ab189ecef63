// Package metrics has no code: its tests check that promevents and
// otelevents report a known workload the same way on every store.
package metrics
