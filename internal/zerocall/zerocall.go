// Package zerocall calls every exported function and method of a package
// with zero values — nil contexts, nil pointers, nil funcs, empty strings —
// and fails the test when a call panics, or when a call given a nil
// context or a nil receiver returns no typed error. It checks, by parsing
// the package's source, that no exported function or method was left out,
// so that a new entry point is covered as soon as it is written.
package zerocall

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock/store"
)

// Suite is what one package exports.
type Suite struct {
	// Dir is the package's source directory ("." in its own test). Every
	// exported function and every exported method of an exported type
	// declared in its non-test files must be in Funcs or have a receiver
	// in Receivers.
	Dir string
	// Funcs are the exported functions by name. Generic functions are
	// given instantiated ("Execute": sleeplock.Execute[int]).
	Funcs map[string]any
	// Receivers make the values whose exported methods are all called:
	// nil pointers, pointers to zero values, and values that work. Each is
	// called anew for every call; a receiver with a Close() error method is
	// closed after the call.
	Receivers []func() any
	// Skip names calls not made, with why: "Func" or "Type.Method".
	Skip map[string]string
	// Partial skips the check that every exported function and method is
	// covered, for a suite that adds receivers to a complete one.
	Partial bool
}

// variant is one way of filling the arguments.
type variant int

const (
	allZero variant = iota // every argument its zero value: nil context, nil pointer, ""
	liveCtx                // a live context; the rest zero
	nonNil                 // a live context; pointers to zero values, empty slices and maps, funcs returning zeros
	nVariants
)

func (v variant) String() string {
	return [...]string{"zero arguments", "live context, zero arguments", "live context, non-nil zero arguments"}[v]
}

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
)

// Run makes every call of s, each in a subtest named after it.
func Run(t *testing.T, s Suite) {
	t.Helper()
	if !s.Partial {
		checkCovered(t, s)
	}
	names := make([]string, 0, len(s.Funcs))
	for name := range s.Funcs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if why, ok := s.Skip[name]; ok {
			t.Logf("%s not called: %s", name, why)
			continue
		}
		fn := reflect.ValueOf(s.Funcs[name])
		if fn.Kind() != reflect.Func {
			t.Errorf("Funcs[%q] is a %s, not a function", name, fn.Kind())
			continue
		}
		t.Run(name, func(t *testing.T) {
			for v := range nVariants {
				for _, extra := range variadics(fn.Type()) {
					call(t, name, v, false, func() reflect.Value { return fn }, extra, nil)
				}
			}
		})
	}
	for _, mk := range s.Receivers {
		r := reflect.ValueOf(mk())
		typ := r.Type()
		nilRecv := (typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Func) && r.IsNil()
		recvName := describeValue(r)
		closeValue(r)
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			full := typeName(typ) + "." + m.Name
			if why, ok := s.Skip[full]; ok {
				t.Logf("%s not called: %s", full, why)
				continue
			}
			t.Run(recvName+"."+m.Name, func(t *testing.T) {
				for v := range nVariants {
					var recv reflect.Value
					get := func() reflect.Value {
						recv = reflect.ValueOf(mk())
						return recv.Method(i)
					}
					for _, extra := range variadics(m.Type) {
						call(t, recvName+"."+m.Name, v, nilRecv, get, extra, func() { closeValue(recv) })
					}
				}
			})
		}
	}
}

// variadics is how many arguments to give a variadic parameter: none and
// one (its zero value, a nil option).
func variadics(ft reflect.Type) []int {
	if ft.IsVariadic() {
		return []int{0, 1}
	}
	return []int{0}
}

// call makes one call and checks it.
func call(t *testing.T, name string, v variant, nilRecv bool, get func() reflect.Value, extra int, done func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		fn      reflect.Value
		args    []reflect.Value
		nilCtx  bool
		results []reflect.Value
		stack   []byte
		panicV  any
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				panicV, stack = r, debug.Stack()
			}
		}()
		fn = get()
		args, nilCtx = arguments(fn.Type(), v, extra, ctx)
		results = fn.Call(args)
	}()
	if done != nil {
		done()
	}
	what := fmt.Sprintf("%s(%s)", name, formatArgs(args))
	if panicV != nil {
		t.Errorf("%s [%s] panics: %v\n%s", what, v, panicV, panicFrames(stack))
		return
	}
	// An error result must say what is wrong when there was nothing to
	// work with.
	ft := fn.Type()
	if (nilCtx || nilRecv) && ft.NumOut() > 0 && ft.Out(ft.NumOut()-1) == errType {
		err, _ := results[len(results)-1].Interface().(error)
		switch {
		case err == nil:
			t.Errorf("%s [%s] returns no error", what, v)
		case !typed(err):
			t.Errorf("%s [%s] returns %q, which matches none of the store.Err* sentinels", what, v, err)
		}
	}
	for _, r := range results {
		closeValue(r) // a store or Locks that the call made
	}
}

// typed reports whether err matches one of the sentinels, so callers can
// tell it with errors.Is.
func typed(err error) bool {
	for _, s := range []error{store.ErrInvalid, store.ErrNotHeld, store.ErrNotFound, store.ErrClosed,
		store.ErrUnsupported, store.ErrUnavailable, store.ErrAlreadyDefined, store.ErrLeaseLost, store.ErrReleased, store.ErrTooHeavy, store.ErrInUse} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// arguments fills the parameters of ft for variant v; it reports whether a
// context argument is nil.
func arguments(ft reflect.Type, v variant, extra int, ctx context.Context) ([]reflect.Value, bool) {
	n := ft.NumIn()
	if ft.IsVariadic() {
		n--
	}
	var args []reflect.Value
	nilCtx := false
	for i := range n {
		a, isNil := argument(ft.In(i), v, ctx)
		nilCtx = nilCtx || isNil
		args = append(args, a)
	}
	if ft.IsVariadic() {
		for range extra {
			a, isNil := argument(ft.In(n).Elem(), v, ctx)
			nilCtx = nilCtx || isNil
			args = append(args, a)
		}
	}
	return args, nilCtx
}

func argument(t reflect.Type, v variant, ctx context.Context) (reflect.Value, bool) {
	if t == ctxType {
		if v == allZero {
			return reflect.Zero(t), true
		}
		return reflect.ValueOf(ctx), false
	}
	if v != nonNil {
		return reflect.Zero(t), false
	}
	switch t.Kind() {
	case reflect.Pointer:
		return reflect.New(t.Elem()), false
	case reflect.Slice:
		return reflect.MakeSlice(t, 0, 0), false
	case reflect.Map:
		return reflect.MakeMap(t), false
	case reflect.Chan:
		return reflect.MakeChan(t, 0), false
	case reflect.Func:
		return reflect.MakeFunc(t, func(in []reflect.Value) []reflect.Value {
			out := make([]reflect.Value, t.NumOut())
			for i := range out {
				out[i] = reflect.Zero(t.Out(i))
			}
			return out
		}), false
	}
	return reflect.Zero(t), false
}

// closeValue closes v if it has a Close() error method, ignoring the result
// and any panic (a panic of Close is caught where Close itself is called).
func closeValue(v reflect.Value) {
	if !v.IsValid() {
		return
	}
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return
	}
	c, ok := v.Interface().(interface{ Close() error })
	if !ok {
		return
	}
	defer func() { _ = recover() }()
	_ = c.Close()
}

func formatArgs(args []reflect.Value) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = describeValue(a)
	}
	return strings.Join(s, ", ")
}

func describeValue(v reflect.Value) string {
	if !v.IsValid() {
		return "nil"
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan:
		if v.IsNil() {
			return "nil " + t.String()
		}
		if t.Kind() == reflect.Pointer && v.Elem().IsZero() {
			return "&" + t.Elem().String() + "{}"
		}
	}
	if v.IsZero() {
		return "zero " + t.String()
	}
	return t.String()
}

// typeName is the name of a method's receiver type without its package and
// pointer: "Locks".
func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// checkCovered fails t for every exported function or method declared in
// s.Dir that s does not call.
func checkCovered(t *testing.T, s Suite) {
	t.Helper()
	if s.Dir == "" {
		t.Fatal("zerocall: Suite.Dir is empty")
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		t.Fatalf("zerocall: %v", err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(s.Dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("zerocall: %v", err)
		}
		files = append(files, f)
	}
	methods := map[string]bool{} // "Type.Method" that some receiver has
	for _, mk := range s.Receivers {
		typ := reflect.TypeOf(mk())
		if typ == nil {
			t.Fatal("zerocall: a receiver is an untyped nil")
		}
		for i := range typ.NumMethod() {
			methods[typeName(typ)+"."+typ.Method(i).Name] = true
		}
	}
	for _, f := range files {
		pkg := f.Name
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			if fd.Recv == nil {
				if _, ok := s.Funcs[fd.Name.Name]; !ok {
					if _, skip := s.Skip[fd.Name.Name]; !skip {
						t.Errorf("zerocall: %s.%s is not in Funcs", pkg.Name, fd.Name.Name)
					}
				}
				continue
			}
			recv := receiverName(fd.Recv.List[0].Type)
			if !ast.IsExported(recv) {
				continue
			}
			key := recv + "." + fd.Name.Name
			if _, skip := s.Skip[key]; !methods[key] && !skip {
				t.Errorf("zerocall: no receiver in Receivers has method %s.%s", pkg.Name, key)
			}
		}
	}
}

func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// panicFrames keeps the frames of a stack between the panic and the call
// that reflect made: where the panic happened.
func panicFrames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	var out []string
	in := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "panic("):
			in = true
			i++ // its file line
			continue
		case strings.HasPrefix(l, "reflect.Value."):
			in = false
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
