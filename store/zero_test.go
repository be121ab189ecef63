package store_test

import (
	"testing"

	"github.com/sleeplock/sleeplock/internal/zerocall"
	"github.com/sleeplock/sleeplock/store"
)

// Every exported function and method of package store, called with zero
// values (nil receivers, nil yield functions, zero errors), returns and
// never panics (issue 7 item 9).
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"CheckDefinition": store.CheckDefinition, "CheckName": store.CheckName, "CheckNames": store.CheckNames,
			"CheckRef": store.CheckRef, "CheckSlots": store.CheckSlots, "CheckTTL": store.CheckTTL,
			"FamilyOf": store.FamilyOf, "Invalid": store.Invalid, "NotFound": store.NotFound,
			"NotResizable": store.NotResizable, "NotDeletable": store.NotDeletable, "CheckDefinitions": store.CheckDefinitions,
			"DeletedWhileWaiting": store.DeletedWhileWaiting, "DeletedHold": store.DeletedHold, "GuardLost": store.GuardLost, "NewRef": store.NewRef, "RefOf": store.RefOf,
			"NewRefRange": store.NewRefRange, "Need": store.Need, "Busy": store.Busy, "CheckWeight": store.CheckWeight, "Bucket": store.Bucket,
			"PlanReconcile": store.PlanReconcile,
		},
		Receivers: []func() any{
			func() any { return (*store.AcquireRequest)(nil) },
			func() any { return &store.AcquireRequest{} },
			func() any { return (*store.BusyError)(nil) },
			func() any { return &store.BusyError{} },
			func() any { return (*store.ConflictError)(nil) },
			func() any { return &store.ConflictError{} },
			func() any { return (*store.InUseError)(nil) },
			func() any { return &store.InUseError{} },
			func() any { return (*store.WeightError)(nil) },
			func() any { return &store.WeightError{} },
			func() any { return (*store.ShardError)(nil) },
			func() any { return &store.ShardError{} },
			func() any { return (*store.InvalidError)(nil) },
			func() any { return &store.InvalidError{} },
			func() any { return (*store.Grant)(nil) },
			func() any { return &store.Grant{} },
			func() any { return (*store.Handle)(nil) },
			func() any { return &store.Handle{} },
			func() any { return store.Ref{} },
			func() any { return store.RefRange{} },
			func() any { return store.Holder{} },
			func() any { return (*store.RefSource)(nil) },
			func() any { return &store.RefSource{} },
			func() any { return store.EventType(0) },
			func() any { return store.EventType(255) },
			func() any { return (*store.Histogram)(nil) },
			func() any { return &store.Histogram{} },
			func() any { return (*store.Stats)(nil) },
			func() any { return &store.Stats{} },
			func() any { return (*store.ReconcilePlan)(nil) },
			func() any { return &store.ReconcilePlan{} },
		},
	})
}
