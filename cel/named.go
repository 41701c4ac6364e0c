package cel

import (
	"fmt"
	"reflect"
)

// Named gives expressions that recur across a policy's mutations a name: a policy variable
// holding each, referenced wherever the expression was. A label selector's test, for one,
// recurs in the operations of every mutator that has it, inside every loop body over a list
// those mutators write in, and in each condition of a node several of them create.
//
// The API server evaluates a policy variable lazily, on its first use in an expression, and at
// most once per expression (again for the next mutation, on the object the one before left), so
// a reference gives what the expression gave in its place: the same value, or the same error,
// which && and || absorb alike, and nothing is evaluated where the expression was not. Only an
// expression over the request, the object and other variables may be named, never one that
// reads a comprehension's variable: Add refuses the others.
//
// Besides the evaluations it saves, naming shortens the expressions the API server type-checks
// when the policy is written: cel-go's checker takes time quadratic in the generic calls (in,
// ?:, indexing) of one expression, and a selector's test has several per requirement.
type Named struct {
	list  []named
	taken map[string]bool
}

type named struct {
	name string
	e    Expr
}

// NewNamed returns an empty Named whose names avoid those taken.
func NewNamed(taken []string) *Named {
	n := &Named{taken: map[string]bool{}}
	for _, t := range taken {
		n.taken[t] = true
	}
	return n
}

// Add names e (base, or base_2, ... when taken), unless it is already named or a literal; the
// name is returned ("" for a literal).
func (n *Named) Add(base string, e Expr) (string, error) {
	if IsLiteral(e) {
		return "", nil
	}
	for _, x := range n.list {
		if reflect.DeepEqual(x.e, e) {
			return x.name, nil
		}
	}
	if free := freeIdents(e); len(free) > 0 {
		return "", fmt.Errorf("internal error: %s reads %v, which a policy variable cannot", String(e), free)
	}
	name := base
	for i := 2; n.taken[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	n.taken[name] = true
	n.list = append(n.list, named{name, e})
	return name, nil
}

// Len is the number of named expressions.
func (n *Named) Len() int { return len(n.list) }

// Replace rewrites e, top down, with a reference for every subtree equal to a named expression.
func (n *Named) Replace(e Expr) Expr {
	if n == nil || len(n.list) == 0 {
		return e
	}
	out, _ := rewriteTopDown(e, func(x Expr) (Expr, bool) {
		for _, t := range n.list {
			if sameRoot(x, t.e) && reflect.DeepEqual(x, t.e) {
				return VarRef(t.name), true
			}
		}
		return nil, false
	})
	return out
}

// Used is the named expressions that es reference, as variables, in the order they were added.
func (n *Named) Used(es ...Expr) []NamedExpr {
	var out []NamedExpr
	for _, t := range n.list {
		for _, e := range es {
			if refersTo(e, t.name) {
				out = append(out, NamedExpr{Name: t.name, Expr: t.e})
				break
			}
		}
	}
	return out
}

// All is every named expression, in the order they were added.
func (n *Named) All() []NamedExpr {
	out := make([]NamedExpr, len(n.list))
	for i, t := range n.list {
		out[i] = NamedExpr{Name: t.name, Expr: t.e}
	}
	return out
}

// refersTo: does e reference the variable name?
func refersTo(e Expr, name string) bool {
	if v, ok := AsVarRef(e); ok && v == name {
		return true
	}
	found := false
	eachChild(e, func(k Expr) bool {
		found = found || refersTo(k, name)
		return !found
	})
	return found
}

// sameRoot: are a and b nodes of one kind (and one operator), the cheap test before a deep one?
func sameRoot(a, b Expr) bool {
	switch x := a.(type) {
	case binary:
		y, ok := b.(binary)
		return ok && x.op == y.op
	case unary:
		y, ok := b.(unary)
		return ok && x.op == y.op
	case call:
		y, ok := b.(call)
		return ok && x.fn == y.fn
	default:
		return reflect.TypeOf(a) == reflect.TypeOf(b)
	}
}

// roots are the identifiers a policy variable's expression may read.
var roots = map[string]bool{"object": true, "oldObject": true, "request": true, "params": true,
	"namespaceObject": true, "authorizer": true, "variables": true}

// freeIdents is the identifiers e reads that are neither roots nor bound inside e by a
// comprehension.
func freeIdents(e Expr) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(x Expr, bound map[string]bool)
	walk = func(x Expr, bound map[string]bool) {
		if id, ok := x.(ident); ok {
			if !roots[id.name] && !bound[id.name] && !seen[id.name] {
				seen[id.name] = true
				out = append(out, id.name)
			}
			return
		}
		if c, ok := x.(call); ok && c.target != nil && len(c.args) >= 2 && isMacro(c.fn) {
			// The leading identifiers (all but the last argument) are the variables it binds.
			inner := map[string]bool{}
			for k := range bound {
				inner[k] = true
			}
			for _, a := range c.args[:len(c.args)-1] {
				id, ok := a.(ident)
				if !ok {
					break
				}
				inner[id.name] = true
			}
			walk(c.target, bound)
			for _, a := range c.args {
				walk(a, inner)
			}
			return
		}
		eachChild(x, func(k Expr) bool {
			walk(k, bound)
			return true
		})
	}
	walk(e, map[string]bool{})
	return out
}

// isMacro: is fn a comprehension macro (its leading identifier arguments name the variables it
// binds)?
func isMacro(fn string) bool {
	switch fn {
	case "all", "exists", "exists_one", "existsOne", "map", "filter", "transformList", "transformMap", "transformMapEntry":
		return true
	}
	return false
}

// rewriteTopDown rebuilds e, replacing a node by fn's result where fn gives one (its operands
// then left as they are) and going into its operands otherwise; it reports whether anything was
// replaced. A subtree where nothing was is e's own, unchanged: the simplifications that compare
// trees (condList: c ? [] : [] is []) see it as they saw it before.
func rewriteTopDown(e Expr, fn func(Expr) (Expr, bool)) (Expr, bool) {
	if r, ok := fn(e); ok {
		return r, true
	}
	changed := false
	out := withOperands(e, func(x Expr) Expr {
		y, c := rewriteTopDown(x, fn)
		changed = changed || c
		return y
	})
	if !changed {
		return e, false
	}
	return out, true
}

// withOperands is e with each operand replaced by f of it.
func withOperands(e Expr, f func(Expr) Expr) Expr {
	all := func(xs []Expr) []Expr {
		if xs == nil {
			return nil // as it was: reflect.DeepEqual tells a nil slice from an empty one
		}
		out := make([]Expr, len(xs))
		for i, x := range xs {
			out[i] = f(x)
		}
		return out
	}
	switch x := e.(type) {
	case object:
		return object{typeName: x.typeName, fields: x.fields, vals: all(x.vals), pre: x.pre}
	case cond:
		return cond{f(x.c), f(x.t), f(x.f)}
	case binary:
		return binary{x.op, f(x.l), f(x.r)}
	case unary:
		return unary{x.op, f(x.x)}
	case listExpr:
		return listExpr{all(x.elems)}
	case optList:
		return optList{all(x.elems), x.opt}
	case mapExpr:
		return mapExpr{all(x.keys), all(x.vals)}
	case optMap:
		return optMap{all(x.keys), all(x.vals), x.opt}
	case call:
		var t Expr
		if x.target != nil {
			t = f(x.target)
		}
		return call{t, x.fn, all(x.args)}
	case index:
		return index{f(x.operand), f(x.key), x.opt}
	case field:
		return field{f(x.operand), x.name}
	}
	return e
}
