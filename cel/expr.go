// Package cel builds the CEL expressions of the emitted policies as syntax trees, prints them,
// and checks them against the API server's CEL environment for the target Kubernetes version.
// It also holds what every front end's lowering shares: JSONPatch operations and pointers,
// literals of JSON values, label selectors, and the rewrites that make an expression cheaper
// for the API server without changing what it does (Compact, MergeLoops, KeyLists, Fold).
//
// No user-supplied string is ever pasted into CEL text: strings reach an expression only through
// Str (one escaping function, fuzzed to round-trip), field names only as index keys, and every
// printed expression is parsed again by cel-go and printed back with its unparser, so what is
// emitted is exactly the tree that was built.
//
// It knows no input language: it must not import anything under compiler/ (what a Gatekeeper
// mutator means in CEL is compiler/gatekeeper/lower's business), and it builds no Kubernetes
// objects (package emit does).
package cel

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Expr is a CEL expression tree node.
type Expr interface {
	write(b *writer)
}

// writer prints expressions. With shapes set it prints an expression's shape instead: every
// string and number literal replaced by a placeholder of its type numbered by first appearance
// (so equal literals stay equal and distinct ones distinct), except literals passed directly to
// a function (as an argument or as its target) other than those of freeArgs: the API server's
// environment validates some such values (regular expressions of matches and find, durations,
// timestamps, format strings).
type writer struct {
	sb     strings.Builder
	shapes map[string]string
	count  bool // only count the bytes (Len)
	n      int
}

func (b *writer) WriteString(s string) {
	b.n += len(s)
	if !b.count {
		b.sb.WriteString(s)
	}
}

func (b *writer) WriteByte(c byte) error {
	b.n++
	if !b.count {
		b.sb.WriteByte(c)
	}
	return nil
}

func (b *writer) String() string { return b.sb.String() }

type (
	lit   struct{ text string }
	ident struct{ name string }
	index struct {
		operand, key Expr
		opt          bool // operand[?key]: an optional, empty when operand has no key
	}
	field struct {
		operand Expr
		name    string
	}
	call struct {
		target Expr // nil for a global function
		fn     string
		args   []Expr
	}
	binary struct {
		op   string
		l, r Expr
	}
	unary struct {
		op string
		x  Expr
	}
	cond     struct{ c, t, f Expr }
	listExpr struct{ elems []Expr }
	mapExpr  struct{ keys, vals []Expr }
	object   struct {
		typeName string
		fields   []string
		vals     []Expr
		// pre marks shared creations (SharedCreation), which must stay before the operations that
		// rely on the nodes they create (see CompactTerms).
		pre bool
	}
)

// Str is a string literal. It is the only way a user string enters an expression.
func Str(s string) Expr {
	if !utf8.ValidString(s) {
		// YAML and JSON input is always valid UTF-8; keep the invariant explicit.
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return lit{quote(s)}
}

// quote returns a CEL string literal denoting exactly s. Go's quoting produces only escapes that
// CEL reads the same way (\a \b \f \n \r \t \v \\ \" \xHH \uHHHH \UHHHHHHHH).
func quote(s string) string { return strconv.Quote(s) }

// Int is an integer literal.
func Int(i int64) Expr {
	if i == math.MinInt64 {
		return binary{"-", lit{"-9223372036854775807"}, lit{"1"}}
	}
	return lit{strconv.FormatInt(i, 10)}
}

// Double is a double literal.
func Double(f float64) Expr {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // n: NaN/Inf never come from JSON
		s += ".0"
	}
	return lit{s}
}

// Bool is true or false.
func Bool(v bool) Expr { return lit{strconv.FormatBool(v)} }

// Null is null.
func Null() Expr { return lit{"null"} }

// Ident names a variable: one of the API server's (object, request, ...) or one bound by a
// comprehension this package built. Never a user string.
func Ident(name string) Expr { return ident{name} }

// Index is operand[key].
func Index(operand, key Expr) Expr { return index{operand: operand, key: key} }

// OptIndex is operand[?key]: optional.of(operand[key]) when operand has key, else optional.none().
func OptIndex(operand, key Expr) Expr { return index{operand: operand, key: key, opt: true} }

// Field is operand.name for a name this package chose (never user input; user field names go
// through Index with Str).
func Field(operand Expr, name string) Expr { return field{operand, name} }

// Call is fn(args...).
func Call(fn string, args ...Expr) Expr { return call{nil, fn, args} }

// Method is target.fn(args...).
func Method(target Expr, fn string, args ...Expr) Expr { return call{target, fn, args} }

// Cond is c ? t : f.
func Cond(c, t, f Expr) Expr { return cond{c, t, f} }

// Bin is l op r for op in == != < <= > >= + - * / % && || in.
func Bin(op string, l, r Expr) Expr { return binary{op, l, r} }

// Not is !x.
func Not(x Expr) Expr { return unary{"!", x} }

// Negate is !x, simplified for the literals true and false.
func Negate(x Expr) Expr {
	switch x {
	case True:
		return False
	case False:
		return True
	}
	return Not(x)
}

// List is [elems...].
func List(elems ...Expr) Expr { return listExpr{elems} }

// Map is {keys[i]: vals[i], ...}.
func Map(keys, vals []Expr) Expr { return mapExpr{keys, vals} }

// Object is typeName{field: val, ...} for API server types such as JSONPatch.
func Object(typeName string, fields []string, vals []Expr) Expr {
	return object{typeName: typeName, fields: fields, vals: vals}
}

// And is the conjunction of xs (true when empty; false when one of them is the literal false,
// which decides a CEL conjunction whatever the others give, errors included).
func And(xs ...Expr) Expr {
	var out Expr
	for _, x := range xs {
		if x == nil || isLit(x, "true") {
			continue
		}
		if isLit(x, "false") {
			return False
		}
		if out == nil {
			out = x
		} else {
			out = binary{"&&", out, x}
		}
	}
	if out == nil {
		return True
	}
	return out
}

// Or is the disjunction of xs (false when empty; true when one of them is the literal true,
// which decides a CEL disjunction whatever the others give, errors included).
func Or(xs ...Expr) Expr {
	var out Expr
	for _, x := range xs {
		if x == nil || isLit(x, "false") {
			continue
		}
		if isLit(x, "true") {
			return True
		}
		if out == nil {
			out = x
		} else {
			out = binary{"||", out, x}
		}
	}
	if out == nil {
		return False
	}
	return out
}

// True and False are the boolean literals, comparable by identity for simplification.
var (
	True  Expr = lit{"true"}
	False Expr = lit{"false"}
)

// Value turns a JSON value (as decoded from YAML/JSON) into a CEL literal. Lists and maps whose
// elements are not all of one simple type get dyn() around each element, as the API server's
// environment requires homogeneous aggregate literals.
func Value(v any) (Expr, error) {
	switch x := v.(type) {
	case nil:
		return Null(), nil
	case bool:
		return Bool(x), nil
	case string:
		return Str(x), nil
	case int64:
		return Int(x), nil
	case int:
		return Int(int64(x)), nil
	case int32:
		return Int(int64(x)), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			// JSON has one number type; the API machinery decodes integral numbers as int64.
			return Int(int64(x)), nil
		}
		return Double(x), nil
	case []any:
		elems := make([]Expr, len(x))
		for i, e := range x {
			ee, err := Value(e)
			if err != nil {
				return nil, err
			}
			elems[i] = ee
		}
		if !homogeneous(x) {
			for i := range elems {
				elems[i] = Call("dyn", elems[i])
			}
		}
		return List(elems...), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]any, len(keys))
		ks := make([]Expr, len(keys))
		vs := make([]Expr, len(keys))
		for i, k := range keys {
			vals[i] = x[k]
			ks[i] = Str(k)
			ve, err := Value(x[k])
			if err != nil {
				return nil, err
			}
			vs[i] = ve
		}
		if !homogeneous(vals) {
			for i := range vs {
				vs[i] = Call("dyn", vs[i])
			}
		}
		return Map(ks, vs), nil
	}
	return nil, fmt.Errorf("value %v of type %T has no CEL literal", v, v)
}

func homogeneous(vs []any) bool {
	kind := ""
	for _, v := range vs {
		var k string
		switch x := v.(type) {
		case nil:
			k = "null"
		case bool:
			k = "bool"
		case string:
			k = "string"
		case int64, int, int32:
			k = "int"
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				k = "int"
			} else {
				k = "double"
			}
		default:
			return false // nested lists and maps may differ in element types: always dyn
		}
		if kind != "" && k != kind {
			return false
		}
		kind = k
	}
	return true
}

// String prints the expression (fully parenthesised; Print gives the canonical form).
func String(e Expr) string {
	var b writer
	e.write(&b)
	return b.String()
}

// Len is len(String(e)), without building the string.
func Len(e Expr) int {
	b := writer{count: true}
	e.write(&b)
	return b.n
}

// Shape prints e with its string literals abstracted (see writer): two expressions of one shape
// type-check alike, since CEL's checker looks at a string literal's type, never its value, except
// where a validator reads the literal argument of a call, which Shape keeps.
func Shape(e Expr) string {
	b := writer{shapes: map[string]string{}}
	e.write(&b)
	return b.String()
}

// number writes a number literal, abstracted in a shape as a number of the same type.
func (b *writer) number(text string) {
	p, ok := b.shapes[text]
	if !ok {
		p = strconv.Itoa(len(b.shapes))
		if strings.ContainsAny(text, ".eEn") {
			p += ".0"
		}
		b.shapes[text] = p
	}
	b.WriteString(p)
}

// literal writes a string literal (already quoted), abstracted when printing a shape.
func (b *writer) literal(quoted string) {
	if b.shapes == nil {
		b.WriteString(quoted)
		return
	}
	p, ok := b.shapes[quoted]
	if !ok {
		p = strconv.Quote("s" + strconv.Itoa(len(b.shapes)))
		b.shapes[quoted] = p
	}
	b.WriteString(p)
}

func (l lit) write(b *writer) {
	if strings.HasPrefix(l.text, `"`) {
		b.literal(l.text)
		return
	}
	if b.shapes != nil && l.text != "" && (l.text[0] == '-' || l.text[0] >= '0' && l.text[0] <= '9') {
		b.number(l.text)
		return
	}
	b.WriteString(l.text)
}
func (i ident) write(b *writer) { b.WriteString(i.name) }
func (i index) write(b *writer) {
	writeOperand(b, i.operand)
	b.WriteByte('[')
	if i.opt {
		b.WriteByte('?')
	}
	i.key.write(b)
	b.WriteByte(']')
}
func (f field) write(b *writer) {
	writeOperand(b, f.operand)
	b.WriteByte('.')
	b.WriteString(f.name)
}

// freeArgs are the functions whose literal arguments and targets no validator of the API
// server's environment reads (it checks only their types): in a shape they are abstracted like
// any other literal. A literal passed to any other function stays verbatim in a shape.
var freeArgs = map[string]bool{
	"dyn": true, "string": true, "size": true, "type": true, "orValue": true, "of": true,
	"startsWith": true, "endsWith": true, "contains": true, "indexOf": true, "lastIndexOf": true,
	"substring": true, "replace": true, "split": true, "join": true, "lowerAscii": true, "upperAscii": true,
}

func (c call) write(b *writer) {
	free := freeArgs[c.fn]
	if c.target != nil {
		if l, ok := c.target.(lit); ok && !free {
			b.WriteString(l.text) // verbatim even in a shape
		} else {
			writeOperand(b, c.target)
		}
		b.WriteByte('.')
	}
	b.WriteString(c.fn)
	b.WriteByte('(')
	for i, a := range c.args {
		if i > 0 {
			b.WriteString(", ")
		}
		switch x := a.(type) {
		case lit:
			if free {
				x.write(b)
			} else {
				b.WriteString(x.text) // verbatim even in a shape
			}
		case strLit:
			if free {
				x.write(b)
			} else {
				b.WriteString(strconv.Quote(x.s))
			}
		default:
			a.write(b)
		}
	}
	b.WriteByte(')')
}
func (x binary) write(b *writer) {
	b.WriteByte('(')
	x.l.write(b)
	b.WriteString(") " + x.op + " (")
	x.r.write(b)
	b.WriteByte(')')
}
func (u unary) write(b *writer) {
	b.WriteString(u.op + "(")
	u.x.write(b)
	b.WriteByte(')')
}
func (c cond) write(b *writer) {
	b.WriteByte('(')
	c.c.write(b)
	b.WriteString(") ? (")
	c.t.write(b)
	b.WriteString(") : (")
	c.f.write(b)
	b.WriteByte(')')
}
func (l listExpr) write(b *writer) {
	b.WriteByte('[')
	for i, e := range l.elems {
		if i > 0 {
			b.WriteString(", ")
		}
		e.write(b)
	}
	b.WriteByte(']')
}
func (m mapExpr) write(b *writer) {
	b.WriteByte('{')
	for i := range m.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		m.keys[i].write(b)
		b.WriteString(": ")
		m.vals[i].write(b)
	}
	b.WriteByte('}')
}
func (o object) write(b *writer) {
	b.WriteString(o.typeName + "{")
	for i := range o.fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(o.fields[i] + ": ")
		o.vals[i].write(b)
	}
	b.WriteByte('}')
}

func writeOperand(b *writer, e Expr) {
	switch e.(type) {
	case lit, ident, index, field, call, listExpr, optList, mapExpr, optMap, object:
		e.write(b)
	default:
		b.WriteByte('(')
		e.write(b)
		b.WriteByte(')')
	}
}
