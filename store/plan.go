package store

import "sort"

// Defined is a definition as a store read it, in the transaction (or
// script) that is to carry out a reconcile plan: its slots and, for a
// definition the plan may prune, how much it is in use.
type Defined struct {
	Name  string
	Slots int
	// Use counts the holders and waiters of the definition's locks (of
	// every member in use, for a family) and names the first lock in use,
	// by name (Lock ""), or is zero when none is. A store reads it only
	// for the definitions that no entry names, and only with Prune: the
	// plan looks at no other.
	Use InUseError
}

// StepKind says what a Step does.
type StepKind uint8

// The kinds of Step, in the order a plan lists them.
const (
	StepPrune  StepKind = iota + 1 // delete the definition, as Delete does with the plan's Force
	StepCreate                     // define it: it does not exist
	StepResize                     // resize it: it exists with other slots
)

// Step is one change of a ReconcilePlan.
type Step struct {
	Kind  StepKind
	Name  string
	Slots int // the slots to create or resize to (Prune: the slots it had)
}

// ReconcilePlan is what a Reconcile changes, decided by PlanReconcile. A
// store carries out its steps in order, in the transaction (or script)
// that read the definitions the plan was made from, or checks there
// that they did not change.
type ReconcilePlan struct {
	// Steps: the prunes, by name; then the creates and resizes, in the
	// order of the entries (each name once).
	Steps []Step
	// Force: a prune may end holds and waiters (the plan's prunes were
	// read unused otherwise, so a store that finds one in use when it
	// deletes it refuses with an *InUseError and changes nothing).
	Force   bool
	Holds   int // the holds the prunes end, as read
	Waiters int // the waiters the prunes end, as read
}

// PlanReconcile decides what a Reconcile of defs with opts changes, given
// the store's definitions current: every one when opts.Prune, otherwise
// at least those that an entry names (others are ignored). It is pure: it
// reads nothing but its arguments. An invalid entry, a name given twice
// with other slots, or given with slots other than its definition's
// without opts.Resize, is a *InvalidError or a *ConflictError; with
// opts.Prune and without opts.Force, a definition to prune that is in use
// is an *InUseError naming the first such definition's lock in use and
// counting the holders and waiters of every one (a conflict is reported
// first). A plan with no steps changes nothing.
func PlanReconcile(defs []Definition, current []Defined, opts ReconcileOptions) (ReconcilePlan, error) {
	want, err := CheckDefinitions(defs)
	if err != nil {
		return ReconcilePlan{}, err
	}
	have := make(map[string]int, len(current))
	for _, c := range current {
		have[c.Name] = c.Slots
	}
	var changes []Step
	done := make(map[string]bool, len(defs))
	for _, d := range defs {
		if done[d.Name] {
			continue
		}
		done[d.Name] = true
		slots, ok := have[d.Name]
		switch {
		case !ok:
			changes = append(changes, Step{Kind: StepCreate, Name: d.Name, Slots: d.Slots})
		case slots == d.Slots:
		case opts.Resize:
			changes = append(changes, Step{Kind: StepResize, Name: d.Name, Slots: d.Slots})
		default:
			return ReconcilePlan{}, &ConflictError{Name: d.Name, Slots: slots, Requested: d.Slots}
		}
	}
	p := ReconcilePlan{Force: opts.Force}
	if opts.Prune {
		var doomed []Defined
		for _, c := range current {
			if _, ok := want[c.Name]; !ok {
				doomed = append(doomed, c)
			}
		}
		sort.Slice(doomed, func(i, j int) bool { return doomed[i].Name < doomed[j].Name })
		inUse := ""
		for i, c := range doomed {
			if i > 0 && c.Name == doomed[i-1].Name {
				continue // listed twice
			}
			p.Steps = append(p.Steps, Step{Kind: StepPrune, Name: c.Name, Slots: c.Slots})
			p.Holds += c.Use.Holders
			p.Waiters += c.Use.Waiters
			if inUse == "" && c.Use.Holders+c.Use.Waiters > 0 {
				inUse = c.Use.Lock
				if inUse == "" {
					inUse = c.Name
				}
			}
		}
		if inUse != "" && !opts.Force {
			return ReconcilePlan{}, &InUseError{Lock: inUse, Holders: p.Holds, Waiters: p.Waiters}
		}
	}
	p.Steps = append(p.Steps, changes...)
	return p, nil
}

// Result is what carrying out p did: the Reconciled a store returns (a
// nil plan did nothing).
func (p *ReconcilePlan) Result() Reconciled {
	var r Reconciled
	if p == nil {
		return r
	}
	for _, s := range p.Steps {
		switch s.Kind {
		case StepPrune:
			r.Deleted = append(r.Deleted, s.Name)
		case StepCreate:
			r.Created = append(r.Created, s.Name)
		case StepResize:
			r.Resized = append(r.Resized, s.Name)
		}
	}
	if len(r.Deleted) > 0 {
		r.Holds, r.Waiters = p.Holds, p.Waiters
	}
	return r
}
