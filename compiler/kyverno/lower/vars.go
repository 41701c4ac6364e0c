package lower

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	jmespath "github.com/kyverno/go-jmespath"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// Scope is what a rule's variables can name besides the request: the elements of the foreach
// loops around them (innermost last) and their indices; and what the schema says of the objects
// the rule applies to and of the elements.
type Scope struct {
	Elements      []cel.Expr
	Indexes       []cel.Expr
	Object        Shape   // request.object, request.oldObject
	ElementShapes []Shape // of Elements (missing ones unknown)
	// ConfigMaps are the names of the rule's configMap context entries: each reads the
	// policy's param object (params), the one ConfigMap its binding names.
	ConfigMaps []string
	// Vars are the rule's variable context entries, lowered (see Context).
	Vars []contextVar
	// Features are what the API server's CEL has for the target Kubernetes version.
	Features cel.Features
	// Written are the places of the object (field names) the rule's foreach entries write: a
	// foreach entry's context entries may not read them (Kyverno loads them for each element).
	Written [][]string
	// Registry are Kyverno's registry settings that differ from its defaults ("key: value",
	// from its ConfigMap): images and image_normalize are lowered for the defaults only.
	Registry []string

	// orderFree: the variable's value is read where the order of a list's items changes
	// nothing (a set operator's key or value), so a whole variable keys(m) (or m.keys(@)),
	// whose order in Kyverno follows Go's random map order, can be lowered.
	orderFree bool
}

// variableRe finds Kyverno's {{ }} variables.
var variableRe = kyverno.VariableRe

// expr is a value computed when the rule runs: a variable, or a string with variables in it.
type expr struct {
	e     cel.Expr
	t     types  // the JSON types of its value
	items types  // when it can be a list, the types of the list's items
	vals  types  // when it can be a map, the types of its values
	src   string // the variable as written, where the value is one ("" otherwise), for messages
}

// Substitution replaces the variables in a patch's strings with the CEL expressions of their
// values: a string that is one variable takes the variable's value, of whatever type; a string
// with variables in it takes their values as strings. It also gives every variable's
// expression: Kyverno substitutes all of a rule's variables before it patches, and fails the
// rule when one has no value, wherever it is.

// SubstituteText is the substitution for the value of a patchesJson6902 operation. Kyverno substitutes
// the variables in the operations' YAML text before it parses it (the field is a string), each
// as its text: a string as it is, anything else as its JSON. Every variable of an operation is in
// a quoted scalar, which stays a string: "{{x}}" is x's text, where Substitute gives x's value; or
// in a plain (unquoted) scalar on one line after a literal that makes it a string whatever
// follows (registry.io/{{x}}), which the reader gives as a kyverno.PlainText (it refuses the
// others). A string variable must be tame (see tameness), else YAML would read its text as
// something else.
func SubstituteText(v any, sc Scope, field string) (any, []cel.Expr, error) {
	out, all, _, err := substituteWith(v, sc, field, false, true)
	return out, all, err
}

// maxNullable bounds the distinct variables of one patch that can be null: each doubles the
// patches SubstituteCases gives.
const maxNullable = 3

// PatchCase is a patch with its variables substituted, and the condition under which the rule
// runs it.
type PatchCase struct {
	When  cel.Expr
	Patch any
}

// SubstituteCases is the substitution for a strategic merge patch, whose variables can be null
// where they are values of their own. Kyverno's substitution leaves the null in the patch, which its merge then reads as
// a null written there (a removal, or nothing behind +(key)): the patch is given once for each
// combination of its distinct nullable variables being null or not — with null written in, or
// with the variable known not to be null —, each with the condition that selects it. The cases
// are exclusive and cover every value; the last one's condition is implied by the others failing.
func SubstituteCases(v any, sc Scope, field string) ([]PatchCase, []cel.Expr, error) {
	out, all, _, err := substitute(v, sc, field, true)
	if err != nil {
		return nil, nil, err
	}
	var nullable []expr
	seen := map[string]bool{}
	var walk func(v any, field string, inList bool) error
	walk = func(v any, field string, inList bool) error {
		switch x := v.(type) {
		case expr:
			if x.t&tNull == 0 {
				return nil
			}
			if inList {
				return errorf(field, "the variable %s can be null, and is an item of a list: not supported yet (give a default with ||)", x.src)
			}
			if k := cel.String(x.e); !seen[k] {
				seen[k] = true
				nullable = append(nullable, x)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if err := walk(x[k], join(field, k), false); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(e, fmt.Sprintf("%s[%d]", field, i), true); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(out, field, false); err != nil {
		return nil, nil, err
	}
	if len(nullable) > maxNullable {
		return nil, nil, errorf(field, "%d variables that can be null, each a case of its own: more than %d are not supported (give defaults with ||)", len(nullable), maxNullable)
	}
	cases := []PatchCase{{When: cel.True, Patch: out}}
	for _, n := range nullable {
		isNull := cel.Bin("==", dyn(n.e), cel.Null())
		nonNull := n
		nonNull.t &^= tNull
		var next []PatchCase
		for _, c := range cases {
			next = append(next, PatchCase{When: cel.And(c.When, isNull), Patch: replaceExpr(c.Patch, n.e, nil)})
			if nonNull.t != 0 {
				next = append(next, PatchCase{When: cel.And(c.When, cel.Not(isNull)), Patch: replaceExpr(c.Patch, n.e, nonNull)})
			}
		}
		cases = next
	}
	return cases, all, nil
}

// ChooseCase is the operations of the case whose condition holds (ops: each case's).
func ChooseCase(cases []PatchCase, ops []cel.Expr) cel.Expr {
	out := ops[len(ops)-1]
	for i := len(cases) - 2; i >= 0; i-- {
		out = cel.CondList(cases[i].When, ops[i], out)
	}
	return out
}

// replaceExpr is v with the expressions printed as e replaced by with.
func replaceExpr(v any, e cel.Expr, with any) any {
	switch x := v.(type) {
	case expr:
		if cel.String(x.e) == cel.String(e) {
			return with
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e2 := range x {
			out[k] = replaceExpr(e2, e, with)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e2 := range x {
			out[i] = replaceExpr(e2, e, with)
		}
		return out
	}
	return v
}

// substitute is Substitute; with null, a variable can be null. lossy says whether a variable's
// value is lossy (see value.lossy).
func substitute(v any, sc Scope, field string, null bool) (out any, all []cel.Expr, lossy bool, err error) {
	return substituteWith(v, sc, field, null, false)
}

// substituteWith is substitute; with quoted, a string that is one variable is its text, and a
// kyverno.PlainText a plain scalar (see SubstituteText).
func substituteWith(v any, sc Scope, field string, null, quoted bool) (out any, all []cel.Expr, lossy bool, err error) {
	var walk func(v any, field string) (any, error)
	walk = func(v any, field string) (any, error) {
		x, isStr := v.(string)
		p, isPlain := v.(kyverno.PlainText)
		if isPlain {
			x, isStr, isPlain = string(p), true, quoted
		}
		switch {
		case isStr:
			locs := variableRe.FindAllStringIndex(x, -1)
			if len(locs) == 0 {
				if strings.Contains(x, "{{") {
					return nil, errorf(field, "%q has an unterminated variable", x)
				}
				return x, nil
			}
			if strings.Contains(x, `\{{`) {
				return nil, errorf(field, "%q escapes a variable (\\{{): not supported yet", x)
			}
			vs, err := splices(x)
			if err != nil {
				return nil, errorf(field, "%v", err)
			}
			if isPlain {
				if err := plainLiterals(x, vs); err != nil {
					return nil, errorf(field, "%v", err)
				}
			}
			var parts []cel.Expr
			checkWords := false // a variable's value has no space in valid objects only
			at := 0
			for _, sv := range vs {
				l := sv.loc
				var inner []value
				for _, text := range sv.inner {
					iv, err := variable(text, sc)
					if err != nil {
						return nil, errorf(field, "%v", err)
					}
					all = append(all, iv.e)
					inner = append(inner, iv)
				}
				v, err := variableIn(sv.text, sc, inner, sv.orig)
				if err != nil {
					return nil, errorf(field, "%v", err)
				}
				all = append(all, v.e)
				lossy = lossy || v.lossy
				if len(vs) == 1 && l[0] == 0 && l[1] == len(x) && !quoted {
					if !null && v.t&tNull != 0 {
						return nil, errorf(field, "the variable %s can be null, which Kyverno's patch reads as removing the field: not supported yet (give a default with ||)", x)
					}
					items := v.items
					if items == 0 {
						items = v.sh.item().types()
					}
					return expr{v.e, v.t, items, v.sh.values().types(), x}, nil
				}
				if l[0] > at {
					parts = append(parts, cel.Str(x[at:l[0]]))
				}
				text, err := asText(v)
				if err != nil {
					return nil, errorf(field, "the variable %s: %v", x[l[0]:l[1]], err)
				}
				switch {
				case isPlain && v.t&tStr != 0:
					switch {
					case v.tame&wordAlways != 0:
					case v.tame&wordValid != 0:
						checkWords = true
					default:
						return nil, errorf(field, "the variable %s can hold a space or characters that are not printable ASCII, which change how YAML reads the unquoted scalar it is in (a space before # starts a comment, one after : a mapping, one at the end is dropped): Kyverno substitutes the variable's text into the operations' YAML before it parses it, which mapc cannot reproduce; not supported: write the patch as patchStrategicMerge, where Kyverno substitutes values, not text, or read a value that cannot hold them (images.*, a label's value, a container's name, request.operation, a literal without spaces)", x[l[0]:l[1]])
					}
				case quoted && v.t&tStr != 0:
					switch {
					case v.tame&tameAlways != 0:
					case v.tame&tameValid != 0:
						text = tameCheck(text)
					default:
						return nil, errorf(field, "the variable %s can hold characters that change how YAML reads the quoted scalar it is in (a quote, a backslash, a line break, a control character, a letter outside ASCII): Kyverno substitutes the variable's text into the operations' YAML before it parses it, so such a value makes the YAML fail or say something else, which mapc cannot reproduce; not supported: write the patch as patchStrategicMerge, where Kyverno substitutes values, not text, or read a value that cannot hold them (images.*, a label's value, a container's name, request.operation, a literal)", x[l[0]:l[1]])
					}
				}
				parts = append(parts, text)
				at = l[1]
			}
			if at < len(x) {
				parts = append(parts, cel.Str(x[at:]))
			}
			out := parts[0]
			for _, p := range parts[1:] {
				out = cel.Bin("+", out, p)
			}
			if isPlain && (checkWords || at == len(x)) {
				out = plainCheck(out, checkWords)
			}
			return expr{e: out, t: tStr}, nil
		}
		switch x := v.(type) {
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
	out, err = walk(v, field)
	return out, all, lossy, err
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

// Variable lowers one variable's JMESPath (the text between {{ and }}) to the CEL expression of
// its value, which fails where Kyverno fails the rule (see jmespath.go). Supported: paths
// (names, "quoted names", [index]) below request.object, request.oldObject, request.userInfo,
// request.kind, and request.operation, request.namespace, request.name; serviceAccountName and
// serviceAccountNamespace (see serviceAccount); <entry>.data of the rule's configMap context
// entries (Scope.ConfigMaps: params.data); element (elementN) and
// elementIndex (elementIndexN) in foreach; raw string and JSON literals, ||, &&, !, == and !=,
// pipes, and the functions of the table in functions.go.
func Variable(s string, sc Scope) (cel.Expr, error) {
	v, err := variable(strings.TrimSpace(s), sc)
	if err != nil {
		return nil, err
	}
	return v.e, nil
}

// spliced is a variable of a string: where it is, its JMESPath (trimmed), and the variables
// written inside its text (trimmed), which its JMESPath names as fields (see lowering.inner).
type spliced struct {
	loc   []int
	text  string
	inner []string
	orig  string // the text as written, for messages
}

// splices finds the variables of x. Kyverno substitutes the variables it finds, then looks for
// variables again in the text that makes (pkg/engine/variables: substituteVariablesIfAny): a
// variable written inside another one's text has its value spliced into the outer one's
// JMESPath. Supported there: a variable that is a field name, quoted ("{{element.name}}") or
// bare (.{{element.name}}.), one level deep.
func splices(x string) ([]spliced, error) {
	locs, m, orig := kyverno.MarkVariables(x)
	outer := variableRe.FindAllStringIndex(m, -1)
	if len(outer) == 0 {
		out := make([]spliced, len(locs))
		for i, l := range locs {
			out[i] = spliced{loc: l, text: strings.TrimSpace(x[l[0]+2 : l[1]-2])}
		}
		return out, nil
	}
	if variableRe.MatchString(variableRe.ReplaceAllLiteralString(m, "\x00")) {
		return nil, fmt.Errorf("%q has variables nested more than one deep: not supported", x)
	}
	var out []spliced
	k, o := 0, 0 // the next variable found first, the next outer one
	for i := 0; i < len(m); i++ {
		if o < len(outer) && i == outer[o][0] {
			ol := outer[o]
			var text strings.Builder
			var inner []string
			for j := ol[0] + 2; j < ol[1]-2; j++ {
				if m[j] != 0 {
					text.WriteByte(m[j])
					continue
				}
				quoted := j > ol[0]+2 && m[j-1] == '"' && m[j+1] == '"'
				bare := m[j-1] == '.' && (m[j+1] == '.' || m[j+1] == '[' || j+1 == ol[1]-2 || m[j+1] == ' ')
				raw := j > ol[0]+2 && m[j-1] == '\'' && m[j+1] == '\''
				if !quoted && !bare && !raw {
					return nil, fmt.Errorf("%q has a variable inside another one's text, which Kyverno splices into that text before evaluating it: supported only as a field name (\"{{element.name}}\" or .{{element.name}}.) or as a whole raw string ('{{element.image}}'); write the inner variable's expression in its place (element.image)", x)
				}
				l := locs[k]
				k++
				inner = append(inner, strings.TrimSpace(x[l[0]+2:l[1]-2]))
				mark := "\\u0001"
				if raw {
					// A raw string literal of the value's text: '\x02k', which the lowering
					// reads as the k-th inner variable's text (see lowering.splicedText).
					s := text.String()
					text.Reset()
					text.WriteString(s[:len(s)-1])
					j++
					fmt.Fprintf(&text, "'\x02%d'", len(inner)-1)
					continue
				}
				if quoted {
					mark = "\\u0000"
					s := text.String()
					text.Reset()
					text.WriteString(s[:len(s)-1]) // the quote, written again below
					j++                            // past the closing quote
				}
				fmt.Fprintf(&text, `"%s%d"`, mark, len(inner)-1)
			}
			start, end := orig[ol[0]], orig[ol[1]-1]+1
			out = append(out, spliced{loc: []int{start, end}, text: strings.TrimSpace(text.String()), inner: inner, orig: strings.TrimSpace(x[start+2 : end-2])})
			i = ol[1] - 1
			o++
			continue
		}
		if m[i] == 0 {
			l := locs[k]
			k++
			out = append(out, spliced{loc: l, text: strings.TrimSpace(x[l[0]+2 : l[1]-2])})
		}
	}
	return out, nil
}

// asText is a variable's value inside a string: Kyverno writes a string as it is and any other
// value as JSON.
func asText(v value) (cel.Expr, error) {
	if v.t.only(tStr) {
		return cel.Call("string", v.e), nil
	}
	if !v.t.only(tNull | tBool | tInt | tStr) {
		return nil, fmt.Errorf("its value can be %s: inside a string Kyverno writes a value other than a string, a boolean, an integer or null as JSON, which is not supported yet", typeNames(v.t))
	}
	return jsonText(v), nil
}

// tameCheck is text, a string the API server's validation keeps tame (tameValid), checked: a
// request can carry an object the API server then refuses (a label's value with a quote), whose
// text would change how Kyverno's YAML reads the operations; the policy fails there, as Kyverno
// fails the rule where the YAML then does not parse (a value written to make it parse as other
// operations is not reproduced: the API server refuses the object anyway, unless those
// operations rewrite the value).
func tameCheck(text cel.Expr) cel.Expr {
	c := &lowering{}
	return c.bind(text, false, func(x cel.Expr) cel.Expr {
		return cel.Cond(cel.Method(x, "matches", cel.Str(`^[ -!#-&(-\[\]-~]*$`)), x,
			fail("a quote, a backslash or a character that is not printable ASCII spliced into the YAML of the operations: Kyverno fails the rule"))
	})
}

// plainWords are the plain scalars YAML 1.1 (Kyverno's sigs.k8s.io/yaml) reads as a boolean or
// null rather than as a string.
var plainWords = strings.Fields("y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF null Null NULL")

// plainLiterals checks the literal text of x, a plain scalar with the variables vs: after the
// substitution, YAML must read the scalar as a string, and as the text itself. The scalar must
// begin with a literal whose first character no number, timestamp or null begins with (a
// letter, /, _, …), and that no boolean or null word begins with; and the literal text holds
// no space (with the variables' values, which hold none either, no comment, mapping or
// trailing space can appear; see plainCheck).
func plainLiterals(x string, vs []spliced) error {
	lead := x[:vs[0].loc[0]]
	if lead == "" || strings.ContainsRune("+-.0123456789~<", rune(lead[0])) || slices.ContainsFunc(plainWords, func(w string) bool { return strings.HasPrefix(w, lead) }) {
		return fmt.Errorf("%q is an unquoted YAML scalar with a variable that does not begin with a literal making it a string: Kyverno substitutes the variable's text into the operations' YAML before it parses it, so the scalar's type (string, number, boolean, null) depends on the value; not supported: quote it, and it is a string", x)
	}
	literals := []string{lead}
	for i, v := range vs[1:] {
		literals = append(literals, x[vs[i].loc[1]:v.loc[0]])
	}
	literals = append(literals, x[vs[len(vs)-1].loc[1]:])
	if slices.ContainsFunc(literals, func(l string) bool { return tameOf(l)&wordAlways == 0 }) {
		return fmt.Errorf("%q is an unquoted YAML scalar with a variable and a space or a character that is not printable ASCII outside its variables: Kyverno substitutes the variable's text into the operations' YAML before it parses it, where a space changes how YAML reads the rest (a comment, a mapping, a trailing space dropped); not supported: quote it", x)
	}
	return nil
}

// plainCheck is text, a plain scalar after the substitution, checked where YAML could read it
// otherwise: a scalar that ends with a colon is a mapping without a key to Kyverno's YAML, which
// fails the rule; so does the policy. With words, a variable's value holds no space only in the
// objects the API server stores (a label's value, a name; an image any registry serves), and
// the request can carry another: the policy also fails where a character is not printable
// ASCII, or a space begins a comment (" #"), ends a key (": ") or ends the scalar, which
// Kyverno's YAML then reads as something else or not at all.
func plainCheck(text cel.Expr, words bool) cel.Expr {
	c := &lowering{}
	return c.bind(text, false, func(x cel.Expr) cel.Expr {
		bad := cel.Method(x, "endsWith", cel.Str(":"))
		msg := "an unquoted YAML scalar of the operations ends with a colon after the substitution: Kyverno's YAML does not parse it and fails the rule"
		if words {
			bad = cel.Or(cel.Not(cel.Method(x, "matches", cel.Str(`^[ -~]*$`))), cel.Method(x, "contains", cel.Str(" #")), cel.Method(x, "contains", cel.Str(": ")), cel.Method(x, "endsWith", cel.Str(" ")), bad)
			msg = "a character that is not printable ASCII, a space before # or after :, or a space or a colon at the end, in an unquoted YAML scalar of the operations after the substitution: Kyverno's YAML does not read it as the value"
		}
		return cel.Cond(bad, fail(msg), x)
	})
}

// jsonText is Go's JSON of a string (the string itself), a boolean, an integer or null.
func jsonText(v value) cel.Expr {
	if v.t == tNull && cel.IsLiteral(v.e) {
		return cel.Str("null")
	}
	if v.t&tNull == 0 {
		return cel.Call("string", dyn(v.e))
	}
	c := &lowering{}
	return c.bind(v.e, v.simple, func(x cel.Expr) cel.Expr {
		return cel.Cond(cel.Bin("==", dyn(x), cel.Null()), cel.Str("null"), cel.Call("string", dyn(x)))
	})
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

// pathOf reads a JMESPath made only of names, "quoted names" and [index] selections.
func pathOf(s string) ([]any, error) {
	n, err := jmespath.NewParser().Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not JMESPath Kyverno can read (%v)", err)
	}
	var segs []any
	var walk func(n jmespath.ASTNode) error
	walk = func(n jmespath.ASTNode) error {
		switch n.NodeType {
		case jmespath.ASTField:
			segs = append(segs, n.Value.(string))
		case jmespath.ASTIndex:
			i := n.Value.(int)
			if i < 0 {
				return fmt.Errorf("only non-negative list indices are supported in a path")
			}
			segs = append(segs, i)
		case jmespath.ASTSubexpression, jmespath.ASTIndexExpression:
			for _, k := range n.Children {
				if err := walk(k); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("JMESPath functions, filters and operators are not supported yet")
		}
		return nil
	}
	if err := walk(n); err != nil {
		return nil, err
	}
	if _, ok := segs[0].(string); !ok {
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
		case kyverno.PlainText:
			out = append(out, variableRe.FindAllString(string(x), -1)...)
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
