package lower

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// Preconditions lowers a rule's (or a foreach's) preconditions as Kyverno evaluates them
// (pkg/engine/variables evaluateAnyAllConditionsWithContext): the any block passes when one
// condition does (none given: it passes), the all block when every one does, conditions
// evaluated in order and stopping as Kyverno stops, so that a variable without a value fails
// the rule exactly when Kyverno reaches it.
//
// Supported: the operators Equals, NotEquals, AnyIn, AnyNotIn, AllIn, AllNotIn, GreaterThan,
// GreaterThanOrEquals, LessThan, LessThanOrEquals; a key that is a variable (or a string with
// variables, or a literal); a value that is a string, a boolean, or a list of strings. Values
// that read as quantities compare as Kyverno compares them (compare.go), with the API server's
// quantity library, which is Kyverno's parser. Refused, each with its reason: durations compared
// with a key that can be a string or a number, numbers (and numeric strings in the ordering
// operators) compared with a key that can be a string, a range ("1-10") or a JSON list.
func Preconditions(pc *kyverno.Preconditions, sc Scope, field string) (cel.Expr, error) {
	if pc == nil {
		return cel.True, nil
	}
	lower := func(cs []kyverno.Condition, block string) ([]cel.Expr, error) {
		var out []cel.Expr
		for i, c := range cs {
			f := fmt.Sprintf("%s.%s[%d]", field, block, i)
			e, err := condition1(c, sc, f)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	anyC, err := lower(pc.Any, "any")
	if err != nil {
		return nil, err
	}
	allC, err := lower(pc.All, "all")
	if err != nil {
		return nil, err
	}
	// any: c1 ? true : (c2 ? true : ... false); all: c1 ? (c2 ? ... true : false) : false —
	// conditionals, which evaluate strictly in order (&& and || in CEL do not).
	anyE := cel.Expr(cel.True)
	if len(pc.Any) > 0 {
		anyE = cel.False
		for i := len(anyC) - 1; i >= 0; i-- {
			anyE = cel.Cond(anyC[i], cel.True, anyE)
		}
	}
	var allE cel.Expr = cel.True
	for i := len(allC) - 1; i >= 0; i-- {
		allE = cel.Cond(allC[i], allE, cel.False)
	}
	if len(pc.Any) == 0 {
		return allE, nil
	}
	if len(pc.All) == 0 {
		return anyE, nil
	}
	// Kyverno evaluates the any block, then the all block, whatever the first gave.
	return cel.Cond(anyE, allE, cel.Cond(allE, cel.False, cel.False)), nil
}

// RuleVariables are the expressions of the variables Kyverno's mutate.Mutate substitutes in a
// rule besides its patch's (SubstituteAllInRule, once the preconditions pass): those of the
// preconditions' keys and values, and of the context variable entries' values, each read as a
// condition reads it (null is a value), for Resolved. A variable entry is loaded only where a
// variable names it; its value is substituted here all the same.
func RuleVariables(r *kyverno.Rule, sc Scope) ([]cel.Expr, error) {
	out, err := preconditionVariables(r.Preconditions, sc, "preconditions")
	if err != nil {
		return nil, err
	}
	for _, v := range r.Variables {
		if !v.HasValue {
			continue
		}
		_, vs, _, err := substitute(v.Value, sc, strings.TrimPrefix(v.Field, r.Field+".")+".value", true)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// preconditionVariables are the expressions of the variables of the preconditions' keys and
// values.
func preconditionVariables(pc *kyverno.Preconditions, sc Scope, field string) ([]cel.Expr, error) {
	var out []cel.Expr
	if pc == nil {
		return nil, nil
	}
	for _, b := range []struct {
		name string
		cs   []kyverno.Condition
	}{{"any", pc.Any}, {"all", pc.All}} {
		for i, c := range b.cs {
			for _, o := range []struct {
				name string
				v    any
			}{{"key", c.Key}, {"value", c.Value}} {
				// Only whether they have a value counts here.
				osc := sc
				osc.orderFree = true
				_, vs, _, err := substitute(o.v, osc, fmt.Sprintf("%s.%s[%d].%s", field, b.name, i, o.name), true)
				if err != nil {
					return nil, err
				}
				out = append(out, vs...)
			}
		}
	}
	return out, nil
}

// operand is a condition's key or value: the expression of its value when the rule runs, the
// JSON types it can have and those of its items where it is a list, or the literal.
func operand(v any, sc Scope, field string) (expr, any, bool, error) {
	s, vars, lossy, err := substitute(v, sc, field, true)
	if err != nil {
		return expr{}, nil, false, err
	}
	if len(vars) == 0 {
		return expr{t: literalTypes(v)}, v, false, nil
	}
	e, ok := s.(expr)
	if !ok {
		return expr{}, nil, false, errorf(field, "variables inside a list or map operand are not supported yet")
	}
	return e, nil, lossy, nil
}

// literalTypes is the type of a literal operand as Kyverno reads it: a number's type is not
// known (it reaches Kyverno as an int64 or a float64).
func literalTypes(v any) types {
	if t := typeOf(v); t != tInt && t != tDouble {
		return t
	}
	return tAny
}

// condition1 is one condition.
func condition1(c kyverno.Condition, sc Scope, field string) (cel.Expr, error) {
	op := strings.ToLower(c.Operator)
	switch op {
	case "anyin", "anynotin", "allin", "allnotin", "in", "notin":
		// The set operators ignore the order of a list key's or value's items.
		sc.orderFree = true
	}
	ko, keyLit, lossy, err := operand(c.Key, sc, field+".key")
	if err != nil {
		return nil, err
	}
	key, kt := ko.e, ko.t
	if op == "in" || op == "notin" {
		// Kyverno's deprecated In and NotIn (operator/in.go, notin.go) read a string, number or
		// boolean key against a list value as AnyIn and AnyNotIn do (keyExistsInArray is
		// anyKeyExistsInArray's list case); a list key (whose items must be strings, or
		// Kyverno panics) and a string value they read otherwise.
		if kt&tList != 0 {
			return nil, errorf(field+".key", "%s with a key that can be a list is not supported: Kyverno's %s takes a list key's items as strings and panics on others; use AnyIn, AnyNotIn, AllIn or AllNotIn", c.Operator, c.Operator)
		}
		if _, str := c.Value.(string); str && len(Variables(c.Value)) == 0 {
			return nil, errorf(field+".value", "%s with a string value is not supported: Kyverno reads it as a pattern, then as a JSON list of strings compared exactly; write the value as a list", c.Operator)
		}
		op = map[string]string{"in": "anyin", "notin": "anynotin"}[op]
	}
	if key == nil {
		key, err = cel.Value(keyLit)
		if err != nil {
			return nil, errorf(field+".key", "%v", err)
		}
		key = cel.Call("dyn", key)
	}
	vo, valLit, vlossy, err := operand(c.Value, sc, field+".value")
	if err != nil {
		return nil, err
	}
	if vo.e != nil {
		return runtimeValue(op, c.Operator, key, vo, lossy || vlossy, field+".value")
	}
	if lossy && hasReplacement(valLit) {
		// Kyverno compares the bytes, CEL the characters.
		return nil, errorf(field+".value", "a value holding U+FFFD compared with serviceAccountNamespace is not supported: %s", lossyWhy)
	}
	switch op {
	case "equals", "notequals":
		return equals(key, kt, valLit, field+".value", op == "notequals")
	case "anyin", "anynotin", "allin", "allnotin":
		vals, err := stringList(valLit, field+".value")
		if err != nil {
			return nil, err
		}
		_, one := valLit.(string)
		return setOp(op, key, vals, one), nil
	case "greaterthan", "greaterthanorequals", "lessthan", "lessthanorequals":
		return numericCond(op, key, kt, valLit, sc.Features, field+".value")
	case "durationgreaterthan", "durationgreaterthanorequals", "durationlessthan", "durationlessthanorequals":
		return durationOp(c.Operator, key, kt, field+".key")
	}
	return nil, errorf(field+".operator", "%q is not supported yet (supported: Equals, NotEquals, AnyIn, AnyNotIn, AllIn, AllNotIn, In and NotIn with a list value, GreaterThan, GreaterThanOrEquals, LessThan, LessThanOrEquals)", c.Operator)
}

// runtimeValue is a condition whose value is a variable: a set operator's value that is a list
// of strings, booleans or integers (or null, for which Kyverno's set operators are false). A
// value that can be a string, which Kyverno reads as JSON where it is valid JSON, and the other
// operators, which read a string value as a duration, a quantity, a number or a pattern, are
// refused.
func runtimeValue(op, written string, key cel.Expr, v expr, lossy bool, field string) (cel.Expr, error) {
	switch op {
	case "anyin", "anynotin", "allin", "allnotin":
	default:
		return nil, errorf(field, "a variable as the value of %s is not supported yet: Kyverno reads a string value as a duration, a quantity, a number or a pattern, as it reads a literal; only the set operators (AnyIn, AnyNotIn, AllIn, AllNotIn) take a variable value, a list", written)
	}
	if lossy {
		return nil, errorf(field, "serviceAccountNamespace in a set operator with a variable value is not supported: %s", lossyWhy)
	}
	if !v.t.only(tList | tNull) {
		return nil, errorf(field, "the value can be %s: a set operator's variable value is supported when it is a list (or null), not yet when it can be a string (Kyverno reads a string value as JSON where it is valid JSON, else as one item) or anything else; make it a list, for example with || `[]`", typeNames(v.t))
	}
	items := v.items
	if items == 0 {
		items = tAny // nothing is known of them
	}
	if !items.only(tStr | tBool | tInt) {
		return nil, errorf(field, "the value's items can be %s: a set operator's variable value is supported as a list of strings, booleans or integers (Kyverno compares their text, Go's fmt.Sprint of each)", typeNames(items))
	}
	return setOpList(op, key, v.e), nil
}

// stringList reads a set operator's value: a list of strings, or one string. Numbers and
// booleans in the list are their text, as Kyverno's fmt.Sprint writes them (anyin.go and the
// others), which is the text CEL's string() gives the key's.
func stringList(v any, field string) ([]string, error) {
	var out []string
	switch x := v.(type) {
	case string:
		out = []string{x}
	case []any:
		for _, e := range x {
			switch e := e.(type) {
			case string:
				out = append(out, e)
			case int64, float64, bool:
				out = append(out, fmt.Sprint(e))
			default:
				return nil, errorf(field, "lists of values other than strings, numbers and booleans are not supported yet")
			}
		}
	default:
		return nil, errorf(field, "must be a list of strings")
	}
	if x, ok := v.(string); ok && strings.TrimSpace(x) == "null" {
		// Kyverno reads it as JSON: an empty list.
		return nil, errorf(field, "%q (read as JSON: no value at all) is not supported yet", x)
	}
	for _, s := range out {
		if isRange(s) || strings.HasPrefix(strings.TrimSpace(s), "[") {
			return nil, errorf(field, "%q: ranges and JSON lists in strings are not supported yet", s)
		}
	}
	return out, nil
}

// setOp is AnyIn, AnyNotIn, AllIn or AllNotIn (operator/anyin.go ...) of the run-time key (a
// string, a scalar taken as its text, or a list of them) against literal strings, with
// Kyverno's wildcards both ways.
//
// With one, vals is one string s written as the value itself, which Kyverno reads apart
// (anyKeyExistsInArray, anySetExistsInArray and the All ones): a scalar key's text is in s
// when s, as a pattern, matches it, and only that way; a list key holding s alone is in it;
// beyond that, an s that is valid JSON (a number, a boolean, a quoted string: not a list of
// strings, which stringList refuses) fails to read as a list and the operator is false; any
// other s is a list of one.
func setOp(op string, key cel.Expr, vals []string, one bool) cel.Expr {
	k := cel.Ident("k")
	// in(s): some value and s match either way.
	in := func(s cel.Expr) cel.Expr {
		var cs []cel.Expr
		for _, v := range vals {
			cs = append(cs, cel.Or(Glob(v, s), globRuntime(s, cel.Str(v))))
		}
		return cel.Or(cs...)
	}
	scalar, list := setOpParts(op, k, in)
	if one {
		s := vals[0]
		not := strings.HasSuffix(op, "notin")
		// A scalar key: s as a pattern only.
		scalar = Glob(s, keyText(k))
		if not {
			scalar = cel.Not(scalar)
		}
		if json.Valid([]byte(s)) {
			// Read as JSON, s is not a list of strings, and the operator is false; but
			// AnyIn and AllIn hold where Kyverno's earlier tests do: a scalar key's text
			// matching s, a list key that is s alone.
			list = cel.False
			if !not {
				list = cel.And(cel.Bin("==", cel.Call("size", k), cel.Int(1)), cel.Bin("==", keyText(cel.Index(k, cel.Int(0))), cel.Str(s)))
			} else {
				scalar = cel.False
			}
		}
	}
	return cel.Let("k", cel.Call("dyn", key), onKey(k, scalar, list))
}

// keyText is the text Kyverno's set operators compare of a scalar x: Go's fmt.Sprint, which is
// CEL's string() (a string as it is).
func keyText(x cel.Expr) cel.Expr {
	return cel.Cond(cel.Bin("==", cel.Call("type", x), cel.Ident("string")), x, cel.Call("string", x))
}

// setOpParts is the set operator op on a scalar key k and on a list key k, given in(s): the
// text s is in the value.
func setOpParts(op string, k cel.Expr, in func(cel.Expr) cel.Expr) (scalar, list cel.Expr) {
	e := cel.Ident("e")
	switch op {
	case "anyin":
		scalar = in(keyText(k))
		list = cel.Method(k, "exists", e, in(keyText(e)))
	case "anynotin":
		scalar = cel.Not(in(keyText(k)))
		list = cel.Method(k, "exists", e, cel.Not(in(keyText(e))))
	case "allin":
		scalar = in(keyText(k))
		list = cel.Method(k, "all", e, in(keyText(e)))
	case "allnotin":
		scalar = cel.Not(in(keyText(k)))
		list = cel.Method(k, "all", e, cel.Not(in(keyText(e))))
	}
	return scalar, list
}

// onKey is scalar where the key k is a string, a number or a boolean, list where it is a list,
// and false for the other keys (Kyverno's unsupported types).
func onKey(k, scalar, list cel.Expr) cel.Expr {
	isScalar := cel.Or(cel.Bin("==", cel.Call("type", k), cel.Ident("string")), cel.Bin("==", cel.Call("type", k), cel.Ident("int")),
		cel.Bin("==", cel.Call("type", k), cel.Ident("bool")), cel.Bin("==", cel.Call("type", k), cel.Ident("double")))
	isList := cel.Bin("==", cel.Call("type", k), cel.Ident("list"))
	return cel.Cond(isScalar, scalar, cel.Cond(isList, list, cel.False))
}

// setOpList is setOp with a run-time value vals, a list whose items are strings, booleans or
// integers (their text, as Kyverno's fmt.Sprint writes them), or null (every set operator is
// then false: Kyverno's invalid type).
func setOpList(op string, key, vals cel.Expr) cel.Expr {
	k, vs, v := cel.Ident("k"), cel.Ident("vs"), cel.Ident("v")
	// match is Kyverno's wildcard.Match of the run-time pattern p and text s.
	match := func(p, s cel.Expr) cel.Expr { return cel.Or(cel.Bin("==", p, s), globRuntime(p, s)) }
	in := func(s cel.Expr) cel.Expr {
		return cel.Method(vs, "exists", v, cel.Let("t", keyText(v), cel.Or(match(cel.Ident("t"), s), match(s, cel.Ident("t")))))
	}
	scalar, list := setOpParts(op, k, in)
	body := onKey(k, scalar, list)
	return cel.Let("k", cel.Call("dyn", key), cel.Let("vs", cel.Call("dyn", vals),
		cel.Cond(cel.Bin("==", cel.Call("type", vs), cel.Ident("list")), body, cel.False)))
}

// globRuntime is Kyverno's wildcard match of the text s against the run-time pattern p: p's
// * and ? made a regular expression, its other characters escaped.
func globRuntime(p cel.Expr, s cel.Expr) cel.Expr {
	re := p
	for _, c := range []string{`\`, `.`, `+`, `(`, `)`, `|`, `[`, `]`, `{`, `}`, `^`, `$`} {
		re = cel.Method(re, "replace", cel.Str(c), cel.Str(`\`+c))
	}
	re = cel.Method(cel.Method(re, "replace", cel.Str("*"), cel.Str(".*")), "replace", cel.Str("?"), cel.Str("."))
	wild := cel.Or(cel.Method(p, "contains", cel.Str("*")), cel.Method(p, "contains", cel.Str("?")))
	return cel.And(wild, cel.Method(s, "matches", cel.Bin("+", cel.Bin("+", cel.Str("^(?s)"), re), cel.Str("$"))))
}
