package lower

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mapc-dev/mapc/cel"
)

// Scope is what a rule's variables can name besides the request: the elements of the foreach
// loops around them (innermost last) and their indices.
type Scope struct {
	Elements []cel.Expr
	Indexes  []cel.Expr
}

// variableRe finds Kyverno's {{ }} variables (pkg/engine/variables/regex RegexVariables).
var variableRe = regexp.MustCompile(`\{\{(?:[^{}]|\{[^{}]*\})*\}\}`)

// functionCall finds a JMESPath function call: its name.
var functionCall = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// expr is a value computed when the rule runs: a variable, or a string with variables in it.
type expr struct{ e cel.Expr }

// Substitute replaces the variables in v's strings with the CEL expressions of their values:
// a string that is one variable takes the variable's value, of whatever type; a string with
// variables in it takes their values as strings. It also returns every variable's expression:
// Kyverno substitutes all of a rule's variables before it patches, and fails the rule when one
// has no value, wherever it is.
func Substitute(v any, sc Scope, field string) (any, []cel.Expr, error) {
	var all []cel.Expr
	var walk func(v any, field string) (any, error)
	walk = func(v any, field string) (any, error) {
		switch x := v.(type) {
		case string:
			locs := variableRe.FindAllStringIndex(x, -1)
			if len(locs) == 0 {
				if strings.Contains(x, "{{") {
					return nil, errorf(field, "%q has an unterminated variable", x)
				}
				return x, nil
			}
			var parts []cel.Expr
			at := 0
			for _, l := range locs {
				e, err := Variable(x[l[0]+2:l[1]-2], sc)
				if err != nil {
					return nil, errorf(field, "%v", err)
				}
				all = append(all, e)
				if len(locs) == 1 && l[0] == 0 && l[1] == len(x) {
					return expr{e}, nil
				}
				if l[0] > at {
					parts = append(parts, cel.Str(x[at:l[0]]))
				}
				parts = append(parts, cel.Call("string", e))
				at = l[1]
			}
			if at < len(x) {
				parts = append(parts, cel.Str(x[at:]))
			}
			out := parts[0]
			for _, p := range parts[1:] {
				out = cel.Bin("+", out, p)
			}
			return expr{out}, nil
		case map[string]any:
			out := map[string]any{}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if strings.Contains(k, "{{") {
					return nil, errorf(join(field, k), "variables in keys are not supported yet")
				}
				e, err := walk(x[k], join(field, k))
				if err != nil {
					return nil, err
				}
				out[k] = e
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				w, err := walk(e, fmt.Sprintf("%s[%d]", field, i))
				if err != nil {
					return nil, err
				}
				out[i] = w
			}
			return out, nil
		}
		return v, nil
	}
	out, err := walk(v, field)
	return out, all, err
}

// Resolved is the condition that every variable has a value (evaluating the list fails when
// one has none, as Kyverno's substitution does).
func Resolved(vars []cel.Expr) cel.Expr {
	if len(vars) == 0 {
		return cel.True
	}
	return cel.Bin("==", cel.Call("size", cel.List(dynAll(vars)...)), cel.Int(int64(len(vars))))
}

func dynAll(es []cel.Expr) []cel.Expr {
	out := make([]cel.Expr, len(es))
	for i, e := range es {
		out[i] = cel.Call("dyn", e)
	}
	return out
}

// Variable lowers one variable's JMESPath expression. Supported: paths (names, "quoted names",
// [index]) below request.object, request.oldObject, request.userInfo, request.kind, and
// request.operation, request.namespace, request.name; element (elementN) and elementIndex
// (elementIndexN) in foreach.
func Variable(s string, sc Scope) (cel.Expr, error) {
	s = strings.TrimSpace(s)
	if m := functionCall.FindStringSubmatch(s); m != nil {
		return nil, fmt.Errorf("the variable {{%s}}: the JMESPath function %s is not supported yet: no function is lowered to CEL so far", s, m[1])
	}
	segs, err := jmesPath(s)
	if err != nil {
		return nil, fmt.Errorf("the variable {{%s}}: %v; supported: paths below request.object, request.oldObject, request.userInfo, request.kind, and request.operation, request.namespace, request.name, element, elementIndex", s, err)
	}
	unsupported := func() (cel.Expr, error) {
		return nil, fmt.Errorf("the variable {{%s}} is not supported yet; supported: paths below request.object, request.oldObject, request.userInfo, request.kind, and request.operation, request.namespace, request.name, element, elementIndex", s)
	}
	var cur cel.Expr
	rest := segs
	root, _ := segs[0].(string)
	switch {
	case root == "request" && len(segs) >= 2:
		second, _ := segs[1].(string)
		switch second {
		case "object":
			cur = object
		case "oldObject":
			cur = cel.Ident("oldObject")
		case "operation", "namespace", "name":
			if len(segs) != 2 {
				return unsupported()
			}
			return cel.Field(request, second), nil
		case "userInfo", "kind":
			cur = cel.Field(request, second)
		default:
			return unsupported()
		}
		rest = segs[2:]
	case root == "element" || strings.HasPrefix(root, "element") && isDigits(root[len("element"):]):
		n := len(sc.Elements) - 1
		if root != "element" {
			n, _ = strconv.Atoi(root[len("element"):])
		}
		if n < 0 || n >= len(sc.Elements) {
			return nil, fmt.Errorf("the variable {{%s}} is outside a foreach loop of that depth", s)
		}
		cur = sc.Elements[n]
		rest = segs[1:]
	case root == "elementIndex" || strings.HasPrefix(root, "elementIndex") && isDigits(root[len("elementIndex"):]):
		n := len(sc.Indexes) - 1
		if root != "elementIndex" {
			n, _ = strconv.Atoi(root[len("elementIndex"):])
		}
		if n < 0 || n >= len(sc.Indexes) || len(segs) != 1 {
			return nil, fmt.Errorf("the variable {{%s}} is outside a foreach loop of that depth", s)
		}
		return sc.Indexes[n], nil
	default:
		return unsupported()
	}
	for _, seg := range rest {
		switch x := seg.(type) {
		case string:
			cur = cel.Index(cur, cel.Str(x))
		case int:
			cur = cel.Index(cur, cel.Int(int64(x)))
		}
	}
	return cur, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// jmesPath parses a JMESPath made only of names, "quoted names" and [index] selections.
func jmesPath(s string) ([]any, error) {
	var segs []any
	i := 0
	expectName := true
	for i < len(s) {
		switch c := s[i]; {
		case c == '.' && !expectName && len(segs) > 0:
			expectName = true
			i++
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 || len(segs) == 0 {
				return nil, fmt.Errorf("not a path")
			}
			n, err := strconv.Atoi(s[i+1 : i+j])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("only non-negative list indices are supported in a path")
			}
			segs = append(segs, n)
			i += j + 1
			expectName = false
		case c == '"' && expectName:
			j := i + 1
			var b strings.Builder
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated quoted name")
			}
			segs = append(segs, b.String())
			i = j + 1
			expectName = false
		case expectName && (c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'):
			j := i
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			segs = append(segs, s[i:j])
			i = j
			expectName = false
		default:
			return nil, fmt.Errorf("JMESPath functions, filters and operators are not supported yet")
		}
	}
	if len(segs) == 0 || expectName {
		return nil, fmt.Errorf("not a path")
	}
	return segs, nil
}

// valueOf is the CEL literal of a patch value, with the expressions of its variables.
func valueOf(v any) (cel.Expr, error) {
	if !hasExpr(v) {
		return cel.Value(v)
	}
	switch x := v.(type) {
	case expr:
		return x.e, nil
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		ks := make([]cel.Expr, len(keys))
		vs := make([]cel.Expr, len(keys))
		for i, k := range keys {
			e, err := valueOf(x[k])
			if err != nil {
				return nil, err
			}
			ks[i], vs[i] = cel.Str(k), cel.Call("dyn", e)
		}
		return cel.Map(ks, vs), nil
	case []any:
		es := make([]cel.Expr, len(x))
		for i, e := range x {
			v, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			es[i] = cel.Call("dyn", v)
		}
		return cel.List(es...), nil
	}
	return cel.Value(v)
}

func hasExpr(v any) bool {
	switch x := v.(type) {
	case expr:
		return true
	case map[string]any:
		for _, e := range x {
			if hasExpr(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasExpr(e) {
				return true
			}
		}
	}
	return false
}

// Variables lists the {{ }} variables of v's strings and keys, sorted.
func Variables(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, variableRe.FindAllString(x, -1)...)
		case map[string]any:
			for k, e := range x {
				walk(k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	sort.Strings(out)
	return out
}
