package cel

import (
	"strconv"
	"strings"
)

// Reading trees: code outside this package that recognises what it built (a front end
// simplifying its own guards) reads nodes through these. Trees are values and never change.

// AsBinary reads l op r.
func AsBinary(e Expr) (op string, l, r Expr, ok bool) {
	x, ok := e.(binary)
	return x.op, x.l, x.r, ok
}

// AsUnary reads op(x), such as !x.
func AsUnary(e Expr) (op string, x Expr, ok bool) {
	u, ok := e.(unary)
	return u.op, u.x, ok
}

// AsField reads operand.name.
func AsField(e Expr) (operand Expr, name string, ok bool) {
	f, ok := e.(field)
	return f.operand, f.name, ok
}

// AsIdent reads a name.
func AsIdent(e Expr) (name string, ok bool) {
	i, ok := e.(ident)
	return i.name, ok
}

// AsCall reads target.fn(args...) (target nil for a global function).
func AsCall(e Expr) (target Expr, fn string, args []Expr, ok bool) {
	c, ok := e.(call)
	return c.target, c.fn, c.args, ok
}

// AsCond reads c ? t : f.
func AsCond(e Expr) (c, t, f Expr, ok bool) {
	x, ok := e.(cond)
	return x.c, x.t, x.f, ok
}

// AsList reads a plain list literal [elems...].
func AsList(e Expr) (elems []Expr, ok bool) {
	l, ok := e.(listExpr)
	return l.elems, ok
}

// IsLiteral reports whether e is a literal (string, number, bool or null).
func IsLiteral(e Expr) bool {
	_, ok := e.(lit)
	return ok
}

// StrValue is the value of a string literal (ok false for anything else).
func StrValue(e Expr) (string, bool) { return strValue(e) }

func strValue(e Expr) (string, bool) {
	l, ok := e.(lit)
	if !ok || !strings.HasPrefix(l.text, `"`) {
		return "", false
	}
	s, err := strconv.Unquote(l.text)
	return s, err == nil
}

// Transform rebuilds e bottom up, replacing each node by fn of the node with its operands
// already transformed.
func Transform(e Expr, fn func(Expr) Expr) Expr { return transform(e, fn) }

// Substitute replaces the identifier name by with in e (no comprehension in e may rebind name).
func Substitute(e Expr, name string, with Expr) Expr {
	return transform(e, func(x Expr) Expr {
		if id, ok := x.(ident); ok && id.name == name {
			return with
		}
		return x
	})
}

// Let is body with name bound to the value of init, evaluated once: [init].map(name, body)[0]
// (the API server's environment has no cel.bind).
func Let(name string, init, body Expr) Expr {
	return Index(Method(List(init), "map", Ident(name), body), Int(0))
}

// Uses counts the references to the identifier name in e.
func Uses(e Expr, name string) int {
	if id, ok := e.(ident); ok && id.name == name {
		return 1
	}
	n := 0
	eachChild(e, func(k Expr) bool {
		n += Uses(k, name)
		return true
	})
	return n
}

// SingleOp reads t as one operation op where c holds and none elsewhere ([op], c ? [op] : [],
// c ? [] : [op], nested).
func SingleOp(t Expr) (c, op Expr, ok bool) { return singleOp(t) }

// Homogeneous reports whether Value gives the JSON values vs, as the elements of one list
// literal, without dyn(): all of one simple type.
func Homogeneous(vs []any) bool { return homogeneous(vs) }

// AsVarRef reads variables.name (VarRef).
func AsVarRef(e Expr) (name string, ok bool) {
	operand, name, ok := AsField(e)
	if !ok {
		return "", false
	}
	if id, ok := AsIdent(operand); !ok || id != "variables" {
		return "", false
	}
	return name, true
}

// Outcome is what a test gives on every request of a set, from whether it holds on each kind
// of request there (holds): True when it holds on all, False on none, nil when that depends on
// the request (or the set is empty).
func Outcome(holds []bool) Expr {
	seenTrue, seenFalse := false, false
	for _, h := range holds {
		if h {
			seenTrue = true
		} else {
			seenFalse = true
		}
	}
	switch {
	case seenTrue && !seenFalse:
		return True
	case seenFalse && !seenTrue:
		return False
	}
	return nil
}

// Reads lists the places below the identifier name that e reads, each as the chain of constant
// field names that leads there (name["a"]["b"], name.a, name[?"a"]): a chain is cut where a
// step is not a constant string, and a use of name itself gives the empty chain (it reads all).
func Reads(e Expr, name string) [][]string {
	var out [][]string
	var walk func(e Expr)
	walk = func(e Expr) {
		if chain, ok := readChain(e, name); ok {
			out = append(out, chain)
			return
		}
		if x, ok := e.(index); ok {
			if chain, ok := readChain(x.operand, name); ok {
				out = append(out, chain)
				walk(x.key)
				return
			}
		}
		eachChild(e, func(k Expr) bool {
			walk(k)
			return true
		})
	}
	walk(e)
	return out
}

// readChain reads e as name followed by constant field names.
func readChain(e Expr, name string) ([]string, bool) {
	switch x := e.(type) {
	case ident:
		return []string{}, x.name == name
	case field:
		c, ok := readChain(x.operand, name)
		return append(c, x.name), ok
	case index:
		s, isStr := strValue(x.key)
		if !isStr {
			return nil, false
		}
		c, ok := readChain(x.operand, name)
		return append(c, s), ok
	}
	return nil, false
}

// AnyStep is a step of a Read that the expression computes: any item of a list, any key of a
// map.
const AnyStep = "\x00*"

// Read is a place an expression reads below an identifier: the chain of field names (AnyStep
// for a computed step), and whether only the place's presence is read (Shallow: x[?k].orValue(null)
// compared with null, x[?k].hasValue(), type(x), size(x), a comprehension's walk over x's items).
type Read struct {
	Chain   []string
	Shallow bool
}

// ReadsDeep lists the places below the identifier name that e reads, following comprehensions:
// the element variable of a comprehension over a place is that place's items (AnyStep), and a
// binding of a place ([p].map(v, body)[0], as Let writes it) that place. A use of name (or of
// a variable bound to a place) other than through such chains reads the whole place.
func ReadsDeep(e Expr, name string) []Read {
	r := &deepReads{}
	r.walk(e, map[string][]string{name: {}})
	return r.out
}

type deepReads struct{ out []Read }

// chainOf reads e as a place: a bound identifier followed by fields and indices (a computed
// index is AnyStep, its key walked), and x.orValue(d) as x's place (d walked).
func (r *deepReads) chainOf(e Expr, env map[string][]string) ([]string, bool) {
	switch x := e.(type) {
	case ident:
		c, ok := env[x.name]
		return append([]string(nil), c...), ok
	case field:
		c, ok := r.chainOf(x.operand, env)
		return append(c, x.name), ok
	case index:
		c, ok := r.chainOf(x.operand, env)
		if !ok {
			return nil, false
		}
		if s, isStr := strValue(x.key); isStr {
			return append(c, s), true
		}
		r.walk(x.key, env)
		return append(c, AnyStep), true
	case call:
		if x.fn == "orValue" && x.target != nil && len(x.args) == 1 {
			if c, ok := r.chainOf(x.target, env); ok {
				r.walk(x.args[0], env)
				return c, true
			}
		}
	}
	return nil, false
}

func (r *deepReads) walk(e Expr, env map[string][]string) {
	isNull := func(e Expr) bool { l, ok := e.(lit); return ok && l.text == "null" }
	switch x := e.(type) {
	case binary:
		// present: x[?k].orValue(null) != null (or ==).
		// present, x[?k].orValue(null) != null (or ==), and x != null for a place x.
		if (x.op == "!=" || x.op == "==") && isNull(x.r) {
			if c, ok := x.l.(call); ok && c.fn == "orValue" && len(c.args) == 1 && isNull(c.args[0]) {
				if ch, ok := r.chainOf(c.target, env); ok {
					r.out = append(r.out, Read{Chain: ch, Shallow: true})
					return
				}
			}
			if ch, ok := r.chainOf(x.l, env); ok {
				r.out = append(r.out, Read{Chain: ch, Shallow: true})
				return
			}
		}
	case call:
		switch {
		case x.fn == "hasValue" && x.target != nil && len(x.args) == 0:
			if ch, ok := r.chainOf(x.target, env); ok {
				r.out = append(r.out, Read{Chain: ch, Shallow: true})
				return
			}
		case x.fn == "type" && x.target == nil && len(x.args) == 1:
			// A place's type: filling fields below it never changes it.
			if ch, ok := r.chainOf(x.args[0], env); ok {
				r.out = append(r.out, Read{Chain: ch, Shallow: true})
				return
			}
		case x.fn == "size" && x.target == nil && len(x.args) == 1:
			if ch, ok := r.chainOf(x.args[0], env); ok {
				r.out = append(r.out, Read{Chain: append(ch, AnyStep), Shallow: true})
				return
			}
		}
		if vars := comprehensionVars(x); vars > 0 && x.target != nil {
			inner := make(map[string][]string, len(env)+2)
			for k, v := range env {
				inner[k] = v
			}
			var names []string
			for _, a := range x.args[:vars] {
				names = append(names, a.(ident).name)
				delete(inner, a.(ident).name)
			}
			elem := names[len(names)-1]
			if l, ok := x.target.(listExpr); ok && len(l.elems) == 1 && x.fn == "map" && vars == 1 {
				// A binding: the variable is the place itself.
				if ch, ok := r.chainOf(l.elems[0], env); ok {
					inner[elem] = ch
				} else {
					r.walk(l.elems[0], env)
				}
			} else if ch, ok := r.chainOf(x.target, env); ok {
				r.out = append(r.out, Read{Chain: append(append([]string(nil), ch...), AnyStep), Shallow: true})
				inner[elem] = append(ch, AnyStep)
			} else {
				r.walk(x.target, env)
			}
			for _, a := range x.args[vars:] {
				r.walk(a, inner)
			}
			return
		}
	}
	if ch, ok := r.chainOf(e, env); ok {
		r.out = append(r.out, Read{Chain: ch})
		return
	}
	eachChild(e, func(k Expr) bool {
		r.walk(k, env)
		return true
	})
}

// comprehensionVars is how many variables the comprehension call x binds (its first
// arguments): 0 when x is not one.
func comprehensionVars(x call) int {
	idents := 0
	for _, a := range x.args {
		if _, ok := a.(ident); !ok {
			break
		}
		idents++
	}
	switch x.fn {
	case "transformList", "transformMap", "transformMapEntry":
		if idents >= 2 && len(x.args) >= 3 {
			return 2
		}
	case "all", "exists", "exists_one":
		if idents >= 2 && len(x.args) == 3 {
			return 2
		}
		if idents >= 1 && len(x.args) == 2 {
			return 1
		}
	case "map", "filter", "sortBy":
		if idents >= 1 && len(x.args) >= 2 {
			return 1
		}
	}
	return 0
}
