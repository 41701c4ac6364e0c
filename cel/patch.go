package cel

import (
	"reflect"
	"strconv"
	"strings"
)

// JSONPatch operations: the values of a JSONPatch mutation are lists of these, built by the
// front ends' lowering and rewritten by Compact.

// emptyList is [], a list of no operations.
var emptyList = List()

// IsEmpty reports whether e is the empty list literal: a mutation whose expression is [] never
// writes anything (and [] alone does not type-check as list(JSONPatch)).
func IsEmpty(e Expr) bool { return isEmpty(e) }

func isEmpty(e Expr) bool {
	l, ok := e.(listExpr)
	return ok && len(l.elems) == 0
}

// CondList is c ? t : f for lists of operations, simplified when the branches are equal or c is
// constant.
func CondList(c, t, f Expr) Expr { return condList(c, t, f) }

func condList(c, t, f Expr) Expr {
	switch {
	case c == True:
		return t
	case c == False:
		return f
	case reflect.DeepEqual(t, f):
		return t
	}
	return Cond(c, t, f)
}

// Guarded is c ? ops : [] for a list of JSONPatch operations.
func Guarded(c, ops Expr) Expr { return condList(c, ops, emptyList) }

// PatchOp is the operation JSONPatch{op: op, path: p, value: value} (no value when value is nil).
func PatchOp(op string, p Pointer, value Expr) Expr { return patchOp(op, p, value) }

func patchOp(op string, p Pointer, value Expr) Expr {
	fields := []string{"op", "path"}
	vals := []Expr{Str(op), p.Expr()}
	if value != nil {
		fields = append(fields, "value")
		vals = append(vals, value)
	}
	return Object("JSONPatch", fields, vals)
}

// SharedCreation is the "add" of an empty object at p (an empty list when list is set) that
// creates a node several fused mutations write below: it is marked so that compaction keeps it
// before the operations that rely on it (see CompactTerms).
func SharedCreation(p Pointer, list bool) Expr { return preOpOf(p, list) }

// preOp adds an empty object at p, marked as a shared creation.
func preOp(p Pointer) Expr { return preOpOf(p, false) }

// preOpOf is preOp, creating an empty list when list is set.
func preOpOf(p Pointer, list bool) Expr {
	var v Expr = Map(nil, nil)
	if list {
		v = List()
	}
	o := patchOp("add", p, v).(object)
	o.pre = true
	return o
}

// Pointer is a JSON pointer built from static segments and run-time list indices. The zero
// value is the root.
type Pointer struct{ parts []Expr }

// Child is the pointer to the object member seg below p (escaped as RFC 6901 says).
func (p Pointer) Child(seg string) Pointer {
	return p.appendStatic("/" + escapePointer(seg))
}

// Index is the pointer to the list element at the run-time index i below p.
func (p Pointer) Index(i Expr) Pointer {
	q := p.appendStatic("/")
	return Pointer{append(append([]Expr(nil), q.parts...), Call("string", i))}
}

// Key is the pointer to the object member whose name is the run-time string k below p
// (escaped with jsonpatch.escapeKey, the API server's RFC 6901 escaping).
func (p Pointer) Key(k Expr) Pointer {
	q := p.appendStatic("/")
	return Pointer{append(append([]Expr(nil), q.parts...), Call("jsonpatch.escapeKey", k))}
}

func (p Pointer) appendStatic(s string) Pointer {
	parts := append([]Expr(nil), p.parts...)
	if n := len(parts); n > 0 {
		if l, ok := parts[n-1].(strLit); ok {
			parts[n-1] = strLit{l.s + s}
			return Pointer{parts}
		}
	}
	return Pointer{append(parts, strLit{s})}
}

// Expr is the pointer as a CEL string expression: its static pieces as literals, concatenated
// with its run-time indices.
func (p Pointer) Expr() Expr {
	var out Expr
	for _, part := range p.parts {
		e := part
		if l, ok := part.(strLit); ok {
			e = Str(l.s)
		}
		if out == nil {
			out = e
		} else {
			out = Bin("+", out, e)
		}
	}
	if out == nil {
		return Str("")
	}
	return out
}

// strLit is a static pointer piece, kept unquoted so that neighbours can be merged.
type strLit struct{ s string }

func (s strLit) write(b *writer) { b.literal(strconv.Quote(s.s)) }

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// OptionalList is the list literal of elems, those marked opt written as optionals (?e: an
// element only when the optional has a value); a plain list literal when none is marked.
func OptionalList(elems []Expr, opt []bool) Expr {
	return optList{elems: elems, opt: opt}.plain()
}

// Features says which CEL functions the target API server offers.
type Features struct {
	// Flatten: lists.flatten() (ext.Lists v3; new expressions from Kubernetes 1.35).
	Flatten bool
	// Lists: the rest of ext.Lists v3, sort() and reverse() among them (new expressions from
	// Kubernetes 1.35).
	Lists bool
	// TwoVar: two-variable comprehensions such as transformList (new expressions from 1.33).
	TwoVar bool
	// Semver: the API server's semver library, semver(), isSemver() and compareTo() among them
	// (new expressions from 1.34).
	Semver bool
}
