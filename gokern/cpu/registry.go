package cpu

import "fmt"

// Op is one kernel operation: its generic Go implementation (the oracle,
// always there) and at most one implementation per SIMD family, in the
// spirit of the standard library's crypto/internal/impl. The process
// selects once, under the start-up Selection (Get, Family); tests and
// benchmarks take any family's implementation on an instance (Select,
// Impl) without changing what the process uses.
//
// T is whatever the op's callers call: one function, or a struct of
// functions that must come from the same family.
type Op[T any] struct {
	name  string
	impls map[Family]T // Generic included
	fam   Family       // selected under the start-up selection
	why   string       // why fam was selected
	cur   T
}

// registered holds every op by name. It is written during package
// initialisation only (NewOp and Register are called from package-level
// variable initialisers), so reading it afterwards needs no lock.
var registered = map[string]registeredOp{}

// registeredOp is what the registry reports of an op.
type registeredOp interface {
	Family() Family
	Families() []Family
	Reason() string
}

// NewOp registers the op called name with its generic implementation. The
// name is what cpu.Kernels reports; it must be unique. Call it from a
// package-level variable initialiser.
func NewOp[T any](name string, generic T) *Op[T] {
	if _, dup := registered[name]; dup {
		panic(fmt.Sprintf("cpu: op %q registered twice", name))
	}
	o := &Op[T]{name: name, impls: map[Family]T{Generic: generic}, fam: Generic, cur: generic,
		why: "the only implementation"}
	registered[name] = o
	return o
}

// Register adds impl as family f's implementation (f not Generic, once per
// family) and selects again under the start-up selection. Call it from a
// package-level variable initialiser of the file that builds the family
// (var _ = op.Register(cpu.AVX2, ...)): those run before any init function
// and any caller. It returns true for that use.
func (o *Op[T]) Register(f Family, impl T) bool {
	if f == Generic {
		panic(fmt.Sprintf("cpu: op %q: the generic implementation is given to NewOp", o.name))
	}
	if _, dup := o.impls[f]; dup {
		panic(fmt.Sprintf("cpu: op %q: family %s registered twice", o.name, f))
	}
	o.impls[f] = impl
	o.cur, o.fam, o.why = o.selectWhy(startup)
	return true
}

// Name returns the op's name.
func (o *Op[T]) Name() string { return o.name }

// Get returns the implementation the process selected.
func (o *Op[T]) Get() T { return o.cur }

// Family returns the family of the implementation the process selected.
func (o *Op[T]) Family() Family { return o.fam }

// Reason says why the process selected Family: the dispatch policy's rule
// that chose it (see policy.go).
func (o *Op[T]) Reason() string { return o.why }

// Select returns the implementation of the family chosen under s and that
// family: an instance for tests and benchmarks. Under a selection from
// ParseDisable that is the best usable family (Select(ParseDisable("avx2"))
// runs what BITNET_GO_DISABLE=avx2 with BITNET_GO_DISPATCH=best-first would
// run); under Startup() or WithDispatch, the dispatch policy's choice.
func (o *Op[T]) Select(s Selection) (T, Family) {
	impl, f, _ := o.selectWhy(s)
	return impl, f
}

// selectWhy is Select with the reason for the choice.
func (o *Op[T]) selectWhy(s Selection) (T, Family, string) {
	impl := make([]Family, 0, len(o.impls))
	for f := range o.impls {
		impl = append(impl, f)
	}
	var f Family
	why := "the best usable family"
	if s.policy != nil {
		f, why = s.policy.choose(o.name, impl, s.Usable)
	} else {
		f = s.Pick(impl...)
	}
	return o.impls[f], f, why
}

// Impl returns family f's implementation, if the op has one (whether or
// not f is usable here).
func (o *Op[T]) Impl(f Family) (T, bool) {
	k, ok := o.impls[f]
	return k, ok
}

// Families lists the families the op implements that are usable under the
// start-up selection, best last: Generic first. Tests run each of them
// against the generic oracle.
func (o *Op[T]) Families() []Family {
	out := []Family{Generic}
	for i := len(Families) - 1; i >= 0; i-- {
		f := Families[i]
		if _, ok := o.impls[f]; ok && f != Generic && startup.Usable(f) {
			out = append(out, f)
		}
	}
	return out
}

// Impls returns the implementations of Families, in the same order.
func (o *Op[T]) Impls() []T {
	fams := o.Families()
	out := make([]T, len(fams))
	for i, f := range fams {
		out[i] = o.impls[f]
	}
	return out
}

// KernelReasons returns, for every registered op, why the process selected
// its family (Op.Reason).
func KernelReasons() map[string]string { return perOp(registeredOp.Reason) }

// KernelFamilies returns, for every registered op, the families it
// implements that are usable under the start-up selection, generic first
// (Op.Families): those a benchmark can time it with.
func KernelFamilies() map[string][]Family { return perOp(registeredOp.Families) }

// Kernels returns, for every registered op, the family the process
// selected: every op is listed from start-up, whether it ran or not.
func Kernels() map[string]Family { return perOp(registeredOp.Family) }

// perOp maps every registered op's name to f of the op.
func perOp[V any](f func(registeredOp) V) map[string]V {
	out := make(map[string]V, len(registered))
	for name, o := range registered {
		out[name] = f(o)
	}
	return out
}
