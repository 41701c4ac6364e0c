package lower

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	jmespath "github.com/kyverno/go-jmespath"

	"github.com/mapc-dev/mapc/cel"
)

// function lowers one JMESPath function (Kyverno's, pkg/engine/jmespath/functions.go, or the
// library's standard ones): its arguments are the values Kyverno passes it (a missing one null),
// and its CEL fails where Kyverno's function fails (an argument of the wrong type fails the rule).
type function struct {
	args  int // how many arguments (a negative n: at least -n)
	lower func(c *lowering, name string, args []value) (value, error)
}

// functions are the JMESPath functions lowered to CEL, by name. Each is exact for the argument
// types it accepts; others it refuses, saying why.
var functions = map[string]function{
	"to_string":     {1, toString},
	"length":        {1, length},
	"to_upper":      {1, caseMap(strings.ToUpper, "upperAscii")},
	"to_lower":      {1, caseMap(strings.ToLower, "lowerAscii")},
	"split":         {2, splitString},
	"join":          {2, joinStrings},
	"replace_all":   {3, replaceAll},
	"replace":       {4, replaceN},
	"trim":          {2, trim},
	"trim_prefix":   {2, trimPrefix},
	"truncate":      {2, truncate},
	"starts_with":   {2, stringTest("startsWith")},
	"ends_with":     {2, stringTest("endsWith")},
	"contains":      {2, contains},
	"compare":       {2, compare},
	"to_boolean":    {1, toBoolean},
	"regex_match":   {2, regexMatch},
	"pattern_match": {2, patternMatch},

	"regex_replace_all":         {3, regexReplaceAll(false)},
	"regex_replace_all_literal": {3, regexReplaceAll(true)},
	"not_null":                  {-1, notNull},
	"to_array":                  {1, toArray},
	"lookup":                    {2, lookup},
	"type":                      {1, jmesType},
	"sort":                      {1, sortArray},
	"reverse":                   {1, reverse},
	"items":                     {3, items},
	"label_match":               {2, labelMatch},
	"merge":                     {-1, merge},
	"object_from_lists":         {2, objectFromLists},
	"semver_compare":            {2, semverCompare},
	"image_normalize":           {1, imageNormalize},
}

// notLowered says why a function of Kyverno's JMESPath is not lowered.
var notLowered = map[string]string{
	"equal_fold":        "Go's Unicode case folding has no counterpart in the API server's CEL (lowerAscii folds ASCII letters only)",
	"base64_decode":     "the API server's CEL has no base64",
	"base64_encode":     "the API server's CEL has no base64",
	"sha256":            "the API server's CEL has no hash functions",
	"sha1":              "the API server's CEL has no hash functions",
	"md5":               "the API server's CEL has no hash functions",
	"x509_decode":       "the API server's CEL cannot decode certificates",
	"parse_json":        "the API server's CEL cannot parse JSON",
	"parse_yaml":        "the API server's CEL cannot parse YAML",
	"path_canonicalize": "the API server's CEL has no counterpart of Go's filepath.Clean",
	"is_external_url":   "it resolves host names",
	"random":            "its result is random",
	"time_now":          "its result depends on when the rule runs",
	"time_now_utc":      "its result depends on when the rule runs",
	"time_since":        "its result depends on when the rule runs",
	"keys":              "Kyverno's result follows Go's random map order (supported only where the order changes nothing: as the whole key or value of AnyIn, AnyNotIn, AllIn, AllNotIn, and as the argument of sort, length and contains)",
	"values":            "Kyverno's result follows Go's random map order (supported only as the argument of sort, length and contains)",
	"map":               "expression references (&expr) are not supported yet",
	"max_by":            "expression references (&expr) are not supported yet",
	"min_by":            "expression references (&expr) are not supported yet",
	"sort_by":           "expression references (&expr) are not supported yet",
}

// numeric are the functions on numbers: not lowered, since the object's numbers reach Kyverno's
// functions as float64 or int64 depending on the rule (decoded from the request, or from the
// previous rule's result), and the functions accept only float64 (the arithmetic ones quantities
// and durations too).
var numeric = []string{"abs", "add", "avg", "ceil", "divide", "floor", "max", "min", "modulo", "multiply", "round", "subtract", "sum", "to_number"}

// kyvernoFunctions are the other names Kyverno's JMESPath knows (not lowered yet).
var kyvernoFunctions = []string{"time_add", "time_after", "time_before", "time_between", "time_diff", "time_parse", "time_to_cron", "time_truncate", "time_utc"}

// orderFreeArgument are the functions whose result does not depend on the order of the items
// of their first argument, where it is an array: keys and values (whose order is Go's random map
// order) are lowered there.
var orderFreeArgument = map[string]bool{"sort": true, "length": true, "contains": true}

// call is a function call.
func (c *lowering) call(n jmespath.ASTNode, cur value) (value, error) {
	name, _ := n.Value.(string)
	if c.unorderedNext {
		c.unorderedNext = false
		if (name == "keys" || name == "values") && len(n.Children) == 1 {
			return c.unordered(name, n, cur)
		}
	}
	f, ok := functions[name]
	if !ok {
		why := notLowered[name]
		switch {
		case why != "":
		case slices.Contains(numeric, name):
			why = "the object's numbers reach Kyverno's functions as float64 or int64 depending on the rule, and its functions accept float64 only"
		case slices.Contains(kyvernoFunctions, name):
			why = "not lowered to CEL yet"
		default:
			return value{}, c.refuse("%s is not a function of Kyverno's JMESPath: Kyverno fails the rule (%s)", name, supportedFunctions())
		}
		return value{}, c.refuse("the JMESPath function %s is not supported: %s (%s)", name, why, supportedFunctions())
	}
	if f.args >= 0 && len(n.Children) != f.args || f.args < 0 && len(n.Children) < -f.args {
		return value{}, c.refuse("%s takes %s, not %d: Kyverno fails the rule", name, plural(f.args), len(n.Children))
	}
	args := make([]value, len(n.Children))
	for i, a := range n.Children {
		if i == 0 && orderFreeArgument[name] && (isKeysCall(a) || isCallOnPath(a, "values")) {
			c.unorderedNext = true // the order of its names or values changes nothing here
		}
		v, err := c.operand(a, cur)
		if err != nil {
			return value{}, err
		}
		if v.lossy {
			return value{}, c.refuse("%s", lossyWhy)
		}
		args[i] = v
	}
	return f.lower(c, name, args)
}

// unordered is keys(m) or values(m): the names or the values of the object m, in an order of
// CEL's, which only a reader that ignores the order may see (Kyverno's follows Go's random map
// order); anything but an object fails, as in Kyverno.
func (c *lowering) unordered(name string, n jmespath.ASTNode, cur value) (value, error) {
	a, err := c.operand(n.Children[0], cur)
	if err != nil {
		return value{}, err
	}
	if a.lossy {
		return value{}, c.refuse("%s", lossyWhy)
	}
	k := cel.Ident("k")
	e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
		var each cel.Expr = k
		if name == "values" {
			each = cel.Index(dyn(x), k)
		}
		return cel.Cond(isType(dyn(x), "map"), cel.Method(dyn(x), "map", k, each), fail(name+": the argument is not an object: Kyverno fails the rule"))
	})
	v := found(e, tList, false)
	v.items = tStr
	if name == "values" {
		v.items = a.sh.values().types()
	}
	return v, nil
}

func plural(n int) string {
	switch {
	case n == 1:
		return "1 argument"
	case n < 0:
		return fmt.Sprintf("at least %d arguments", -n)
	}
	return fmt.Sprintf("%d arguments", n)
}

// supportedFunctions says which functions are lowered.
func supportedFunctions() string {
	return "supported: " + strings.Join(slices.Sorted(maps.Keys(functions)), ", ")
}

// fail is an expression whose evaluation fails, saying why.
func fail(why string) cel.Expr {
	return cel.Index(cel.Map(nil, nil), cel.Str(why))
}

// stringsOnly is body where every argument is a string (tested when its types allow others,
// its expression cheap to repeat), else a failure: Kyverno's functions fail on an argument of
// another type.
func stringsOnly(name string, body cel.Expr, args ...value) cel.Expr {
	return typedOnly(body, tStr, "string", name+": an argument is not a string: Kyverno fails the rule", args...)
}

// typedOnly is body where every argument is of the type t (CEL's celType), tested when its types
// allow others, else a failure saying why.
func typedOnly(body cel.Expr, t types, celType, why string, args ...value) cel.Expr {
	var tests []cel.Expr
	for _, a := range args {
		if !a.t.only(t) {
			tests = append(tests, isType(a.e, celType))
		}
	}
	if len(tests) == 0 {
		return body
	}
	return cel.Cond(cel.And(tests...), body, fail(why))
}

// onString is body of the value of s (dyn(), evaluated once) where it is a string, else a failure
// (stringsOnly).
func (c *lowering) onString(name string, s value, body func(cel.Expr) cel.Expr) cel.Expr {
	return c.bind(s.e, s.simple, func(x cel.Expr) cel.Expr {
		sv := s
		sv.e = x
		return stringsOnly(name, body(dyn(x)), sv)
	})
}

// bindAll gives body the values of args, each evaluated once.
func (c *lowering) bindAll(args []value, body func([]value) cel.Expr) cel.Expr {
	var rec func(i int, bound []value) cel.Expr
	rec = func(i int, bound []value) cel.Expr {
		if i == len(args) {
			return body(bound)
		}
		a := args[i]
		return c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
			b := a
			b.e, b.simple = x, true
			return rec(i+1, append(bound, b))
		})
	}
	return rec(0, nil)
}

// stringLiteral is the value of a string literal argument.
func stringLiteral(a value) (string, bool) {
	if !a.simple {
		return "", false
	}
	return cel.StrValue(a.e)
}

// numberLiteral is the value of a number literal argument (a float64 in Kyverno).
func numberLiteral(a value) (float64, bool) {
	if !a.jnum || !cel.IsLiteral(a.e) {
		return 0, false
	}
	var f float64
	_, err := fmt.Sscan(cel.String(a.e), &f)
	return f, err == nil
}

// toString is to_string: a string as it is, anything else as Go's JSON.
func toString(c *lowering, name string, args []value) (value, error) {
	a := args[0]
	if !a.t.only(tNull | tBool | tInt | tStr) {
		return value{}, c.refuse("to_string of a value that can be %s: Kyverno writes a list, an object or a number with a fraction as Go's JSON, which CEL cannot reproduce; not supported", typeNames(a.t))
	}
	if a.t.only(tStr) {
		return a, nil
	}
	v := found(jsonText(a), tStr, false)
	v.ascii, v.tame = a.t&tStr == 0 || a.ascii, a.tame
	if a.t&tStr == 0 {
		v.tame = tameWord // JSON's text of a boolean, an integer or null
	}
	return v, nil
}

// length is length: the characters of a string, the items of an array, the fields of an object.
func length(c *lowering, name string, args []value) (value, error) {
	v := found(cel.Call("size", dyn(args[0].e)), tInt, false)
	v.jnum = true
	return v, nil
}

// caseMap is to_upper or to_lower: Go's strings.ToUpper maps every Unicode letter, CEL's
// upperAscii only ASCII ones. A table of the 1,400 others in every expression would exceed
// CEL's limit on an expression's length; so the argument must be ASCII: a literal (mapped here)
// or request.operation, request.kind.
func caseMap(goMap func(string) string, method string) func(c *lowering, name string, args []value) (value, error) {
	return func(c *lowering, name string, args []value) (value, error) {
		a := args[0]
		if s, ok := stringLiteral(a); ok {
			v := found(cel.Str(goMap(s)), tStr, true)
			v.ascii, v.tame = a.ascii, tameOf(goMap(s))
			return v, nil
		}
		if !a.ascii {
			return value{}, c.refuse("%s of a value that can hold letters outside ASCII is not supported: Kyverno maps every Unicode letter, the API server's CEL (%s) only ASCII ones", name, method)
		}
		e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
			b := a
			b.e = x
			return stringsOnly(name, cel.Method(dyn(x), method), b)
		})
		v := found(e, tStr, false)
		v.ascii, v.tame = true, a.tame
		return v, nil
	}
}

// splitString is split: Go's strings.Split, as CEL's split.
func splitString(c *lowering, name string, args []value) (value, error) {
	e := c.bindAll(args, func(a []value) cel.Expr {
		return stringsOnly(name, cel.Method(dyn(a[0].e), "split", arg(a[1].e)), a...)
	})
	v := found(e, tList, false)
	v.items = tStr
	return v, nil
}

// joinStrings is join: the separator, and an array of strings.
func joinStrings(c *lowering, name string, args []value) (value, error) {
	sep, list := args[0], args[1]
	// CEL's join fails on an item that is not a string, as Kyverno does.
	e := c.bind(sep.e, sep.simple, func(s cel.Expr) cel.Expr {
		sv := sep
		sv.e = s
		return stringsOnly(name, cel.Method(dyn(list.e), "join", arg(s)), sv)
	})
	return found(e, tStr, false), nil
}

// replaceAll is replace_all: Go's strings.ReplaceAll, as CEL's replace.
func replaceAll(c *lowering, name string, args []value) (value, error) {
	e := c.bindAll(args, func(a []value) cel.Expr {
		return stringsOnly(name, cel.Method(dyn(a[0].e), "replace", arg(a[1].e), arg(a[2].e)), a...)
	})
	v := found(e, tStr, false)
	v.tame = args[0].tame & args[2].tame // pieces of the text and the new text
	return v, nil
}

// replaceN is replace: Go's strings.Replace with a count, which must be a number literal (Kyverno
// takes a float64 only).
func replaceN(c *lowering, name string, args []value) (value, error) {
	n, ok := numberLiteral(args[3])
	if !ok {
		return value{}, c.refuse("replace's count must be a number literal (`1`): Kyverno takes a float64 only, and the object's numbers reach it as int64 or float64")
	}
	if math.Abs(n) >= 1<<31 {
		return value{}, c.refuse("replace's count %v is out of range", n)
	}
	e := c.bindAll(args[:3], func(a []value) cel.Expr {
		return stringsOnly(name, cel.Method(dyn(a[0].e), "replace", arg(a[1].e), arg(a[2].e), cel.Int(int64(n))), a...)
	})
	v := found(e, tStr, false)
	v.tame = args[0].tame & args[2].tame
	return v, nil
}

// trim is trim: Go's strings.Trim, which removes the characters of a cutset (a string literal)
// from both ends: CEL's find of the text from the first character outside the set to the last.
func trim(c *lowering, name string, args []value) (value, error) {
	set, ok := stringLiteral(args[1])
	if !ok {
		return value{}, c.refuse("trim's cutset must be a string literal ('...')")
	}
	s := args[0]
	if set == "" {
		// strings.Trim gives s itself.
		return found(stringsOnly(name, dyn(s.e), s), tStr, false), nil
	}
	var class strings.Builder
	for _, r := range set {
		fmt.Fprintf(&class, `\x{%x}`, r)
	}
	re := fmt.Sprintf(`(?s)[^%s](?:.*[^%s])?`, class.String(), class.String())
	e := c.bind(s.e, s.simple, func(x cel.Expr) cel.Expr {
		sv := s
		sv.e = x
		return stringsOnly(name, cel.Method(dyn(x), "find", cel.Str(re)), sv)
	})
	return found(e, tStr, false), nil
}

// trimPrefix is trim_prefix: Go's strings.TrimPrefix.
func trimPrefix(c *lowering, name string, args []value) (value, error) {
	e := c.bindAll(args, func(a []value) cel.Expr {
		s, p := dyn(a[0].e), arg(a[1].e)
		return stringsOnly(name, cel.Cond(cel.Method(s, "startsWith", p), cel.Method(s, "substring", cel.Call("size", p)), s), a...)
	})
	return found(e, tStr, false), nil
}

// truncate is truncate: the first n characters (n a number literal, Kyverno takes a float64
// only; a negative n is 0).
func truncate(c *lowering, name string, args []value) (value, error) {
	f, ok := numberLiteral(args[1])
	if !ok {
		return value{}, c.refuse("truncate's length must be a number literal (`63`): Kyverno takes a float64 only, and the object's numbers reach it as int64 or float64")
	}
	if math.Abs(f) >= 1<<31 {
		return value{}, c.refuse("truncate's length %v is out of range", f)
	}
	n := max(int64(f), 0)
	s := args[0]
	e := c.bind(s.e, s.simple, func(x cel.Expr) cel.Expr {
		sv := s
		sv.e = x
		size := cel.Call("size", dyn(x))
		end := cel.Cond(cel.Bin(">", size, cel.Int(n)), cel.Int(n), size)
		return stringsOnly(name, cel.Method(dyn(x), "substring", cel.Int(0), end), sv)
	})
	v := found(e, tStr, false)
	v.ascii, v.tame = s.ascii, s.tame
	return v, nil
}

// stringTest is starts_with or ends_with, as CEL's startsWith and endsWith.
func stringTest(method string) func(c *lowering, name string, args []value) (value, error) {
	return func(c *lowering, name string, args []value) (value, error) {
		e := c.bindAll(args, func(a []value) cel.Expr {
			return stringsOnly(name, cel.Method(dyn(a[0].e), method, arg(a[1].e)), a...)
		})
		return found(e, tBool, false), nil
	}
}

// contains is contains: a substring of a string (false for a search that is not a string), or an
// item of an array by Go's ==, which tells an int64 from a float64 (and panics on two lists or
// objects): so the search must be a string, a boolean or null.
func contains(c *lowering, name string, args []value) (value, error) {
	if !args[1].t.only(tNull | tBool | tStr) {
		return value{}, c.refuse("contains is supported when what it looks for is a string, a boolean or null: Kyverno compares numbers by their Go type (int64 or float64), which depends on the rule")
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		in, x := a[0].e, cel.Call("dyn", a[1].e)
		str := cel.Cond(isType(x, "string"), cel.Method(dyn(in), "contains", x), cel.False)
		return cel.Cond(isType(in, "list"), cel.Bin("in", x, dyn(in)),
			cel.Cond(isType(in, "string"), str, fail(name+": not a string or an array: Kyverno fails the rule")))
	})
	return found(e, tBool, false), nil
}

// compare is compare: Go's strings.Compare (-1, 0, 1).
func compare(c *lowering, name string, args []value) (value, error) {
	e := c.bindAll(args, func(a []value) cel.Expr {
		x, y := dyn(a[0].e), dyn(a[1].e)
		return stringsOnly(name, cel.Cond(cel.Bin("<", x, y), cel.Int(-1), cel.Cond(cel.Bin("==", x, y), cel.Int(0), cel.Int(1))), a...)
	})
	return found(e, tInt, false), nil
}

// toBoolean is to_boolean: "true" or "false" in any case (Go's strings.ToLower maps no letter
// outside ASCII to one of theirs), anything else fails.
func toBoolean(c *lowering, name string, args []value) (value, error) {
	s := args[0]
	e := c.bind(cel.Method(dyn(s.e), "lowerAscii"), false, func(x cel.Expr) cel.Expr {
		return cel.Cond(cel.Bin("==", x, cel.Str("true")), cel.True,
			cel.Cond(cel.Bin("==", x, cel.Str("false")), cel.False, fail(name+": neither true nor false: Kyverno fails the rule")))
	})
	return found(e, tBool, false), nil
}

// textOnly refuses a value Kyverno's regex_match and pattern_match read as text although CEL
// cannot: a boolean, a number (Go's 32-bit float formatting of a float64; an int64 fails).
func textOnly(c *lowering, name string, a value) error {
	if !a.t.only(tNull | tStr | tList | tMap) {
		return c.refuse("%s of a value that can be %s is not supported: Kyverno matches a boolean or a float64 as text (an int64 fails), CEL cannot", name, typeNames(a.t))
	}
	return nil
}

// regexMatch is regex_match: Go's regexp, as CEL's matches.
func regexMatch(c *lowering, name string, args []value) (value, error) {
	if err := textOnly(c, name, args[1]); err != nil {
		return value{}, err
	}
	if re, ok := stringLiteral(args[0]); ok {
		if _, err := regexp.Compile(re); err != nil {
			return value{}, c.refuse("%s: the regular expression %q does not compile (%v): Kyverno fails the rule", name, re, err)
		}
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		return stringsOnly(name, cel.Method(dyn(a[1].e), "matches", arg(a[0].e)), a...)
	})
	return found(e, tBool, false), nil
}

// regexReplaceAll is regex_replace_all (Go's Regexp.ReplaceAll, which expands $1 and ${name} in
// the replacement) and, with literal, regex_replace_all_literal (ReplaceAllLiteral). The API
// server's CEL has no regular-expression replacement, but its find gives the leftmost-first
// match as Go's regexp does: so a pattern anchored at the start of the text (^..., which matches
// at most once) that cannot match the empty text is lowered, as the text where find gives ""
// (no match) and otherwise the replacement followed by the text after the match. The pattern
// and the replacement must be string literals. A regex_replace_all replacement that holds $ is
// expanded as Go expands it where the pattern's one group is between text of known extent
// (^old/(.*)$, ^[^/]+/(.*)$: see groupReplacement): the group's text is then cut from the match.
func regexReplaceAll(literal bool) func(c *lowering, name string, args []value) (value, error) {
	return func(c *lowering, name string, args []value) (value, error) {
		pat, ok := stringLiteral(args[0])
		if !ok {
			return value{}, c.refuse("%s's pattern must be a string literal ('...')", name)
		}
		if _, err := regexp.Compile(pat); err != nil {
			return value{}, c.refuse("%s: the regular expression %q does not compile (%v): Kyverno fails the rule", name, pat, err)
		}
		if g, ok := optionalPrefix(pat); ok {
			return c.optionalPrefixReplace(name, g, pat, literal, args)
		}
		if !anchoredNonEmpty(pat) {
			return value{}, c.refuse("%s is supported for a pattern anchored at the start of the text (^...) that cannot match the empty text, not %q: the API server's CEL has no regular-expression replacement, and finds only the first match", name, pat)
		}
		repl, ok := stringLiteral(args[2])
		if !ok {
			return value{}, c.refuse("%s's replacement must be a string literal ('...')", name)
		}
		// The replacement, as parts: text, and the match (group 0) or its one group (1).
		parts := []replacementPart{{text: repl, group: -1}}
		before, prefix, after := 0, "", 0
		if !literal && strings.Contains(repl, "$") {
			var ok bool
			if parts, before, prefix, after, ok = groupReplacement(pat, repl); !ok {
				return value{}, c.refuse("%s's replacement %q holds $, which Go expands ($1, ${name}): supported where the pattern is ^, literal text or a run of a class up to a character outside it (^[^/]+/), one group, literal text and maybe $ (^old\\.example/(.*)$), not %q (regex_replace_all_literal takes $ as text)", name, repl, pat)
			}
		}
		if err := textOnly(c, name, args[1]); err != nil {
			return value{}, err
		}
		e := c.onString(name, args[1], func(x cel.Expr) cel.Expr {
			return c.bind(cel.Method(x, "find", cel.Str(pat)), false, func(m cel.Expr) cel.Expr {
				out := joinParts(parts, func(group int) cel.Expr {
					switch group {
					case 0:
						return m
					case 1:
						var start cel.Expr = cel.Int(int64(before))
						if prefix != "" {
							start = cel.Call("size", cel.Method(m, "find", cel.Str(prefix)))
						}
						switch {
						case prefix == "" && before == 0 && after == 0:
							return m
						case after == 0:
							return cel.Method(m, "substring", start)
						default:
							return cel.Method(m, "substring", start, cel.Bin("-", cel.Call("size", m), cel.Int(int64(after))))
						}
					}
					return nil
				})
				return cel.Cond(cel.Bin("==", m, cel.Str("")), x, cel.Bin("+", out, cel.Method(x, "substring", cel.Call("size", m))))
			})
		})
		v := found(e, tStr, false)
		v.tame = args[1].tame & tameOf(repl) // pieces of the text and the replacement
		return v, nil
	}
}

// replacementPart is a piece of an expanded replacement: text (group -1), or the text of group
// 0 (the match) or 1.
type replacementPart struct {
	text  string
	group int
}

// groupReplacement expands repl, a replacement of Regexp.ReplaceAll, for the pattern pat when pat
// is ^, text before the group, one group, literal text of after characters, and maybe $: a match
// is then that text, the group's and the other text, so the group's text is the match without
// the text before it and its last after characters. The text before the group is literal text of
// before characters, or (prefix, a regular expression) literal text, a run of a class of
// characters and literal text that begins with a character outside the class (^[^/]+/): only one
// start of a text matches it, so it is the part of any match before the group, and its own
// match (find) tells its length. The expansion is Go's own (Regexp.ExpandString, on a match
// whose groups hold markers): $1, ${1}, the group's name, $$, and an unknown or malformed
// reference ($1x names group "1x": empty) as Go reads them.
func groupReplacement(pat, repl string) (parts []replacementPart, before int, prefix string, after int, ok bool) {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || re.MaxCap() != 1 {
		return nil, 0, "", 0, false
	}
	subs := re.Sub
	take := func(op syntax.Op) *syntax.Regexp {
		if len(subs) > 0 && subs[0].Op == op {
			r := subs[0]
			subs = subs[1:]
			return r
		}
		return nil
	}
	begin := take(syntax.OpBeginText)
	if begin == nil {
		return nil, 0, "", 0, false
	}
	l0 := take(syntax.OpLiteral)
	if l0 != nil {
		before = len(l0.Rune)
	}
	if len(subs) > 0 && (subs[0].Op == syntax.OpPlus || subs[0].Op == syntax.OpStar) && subs[0].Sub[0].Op == syntax.OpCharClass {
		run := take(subs[0].Op)
		l1 := take(syntax.OpLiteral)
		if l1 == nil || l1.Flags&syntax.FoldCase != 0 || inClass(l1.Rune[0], run.Sub[0].Rune) {
			return nil, 0, "", 0, false
		}
		p := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: []*syntax.Regexp{begin}}
		if l0 != nil {
			p.Sub = append(p.Sub, l0)
		}
		p.Sub = append(p.Sub, run, l1)
		prefix = p.String()
		if _, err := regexp.Compile(prefix); err != nil {
			return nil, 0, "", 0, false
		}
	}
	if take(syntax.OpCapture) == nil {
		return nil, 0, "", 0, false
	}
	if l := take(syntax.OpLiteral); l != nil {
		after = len(l.Rune)
	}
	take(syntax.OpEndText)
	compiled, err := regexp.Compile(pat)
	if len(subs) > 0 || err != nil {
		return nil, 0, "", 0, false
	}
	if parts, ok = expandReplacement(compiled, repl, 1); !ok {
		return nil, 0, "", 0, false
	}
	return parts, before, prefix, after, true
}

// optionalPrefix reads a pattern ^(G)?(.*)$ (Kyverno's registry samples:
// ^(localhost/|(?:[a-z0-9]+\.)+[a-z0-9]+/)?(.*)$), where G has no groups, anchors or
// assertions and matches no line break; g is ^(?:G).
func optionalPrefix(pat string) (g string, ok bool) {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || re.MaxCap() != 2 || len(re.Sub) != 4 {
		return "", false
	}
	s := re.Sub
	if s[0].Op != syntax.OpBeginText || s[3].Op != syntax.OpEndText ||
		s[1].Op != syntax.OpQuest || s[1].Flags&syntax.NonGreedy != 0 || s[1].Sub[0].Op != syntax.OpCapture ||
		s[2].Op != syntax.OpCapture || s[2].Sub[0].Op != syntax.OpStar || s[2].Sub[0].Flags&syntax.NonGreedy != 0 ||
		s[2].Sub[0].Sub[0].Op != syntax.OpAnyCharNotNL {
		return "", false
	}
	inner := s[1].Sub[0].Sub[0]
	if !noLineBreak(inner) {
		return "", false
	}
	p := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: []*syntax.Regexp{s[0], inner}}
	g = p.String()
	if _, err := regexp.Compile(g); err != nil {
		return "", false
	}
	return g, true
}

// noLineBreak: does re match only text without \n, with no groups, anchors or assertions?
func noLineBreak(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return !slices.Contains(re.Rune, '\n')
	case syntax.OpCharClass:
		return !inClass('\n', re.Rune)
	case syntax.OpAnyCharNotNL, syntax.OpEmptyMatch:
		return true
	case syntax.OpConcat, syntax.OpAlternate, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		for _, sub := range re.Sub {
			if !noLineBreak(sub) {
				return false
			}
		}
		return true
	}
	return false
}

// optionalPrefixReplace is regex_replace_all with a pattern ^(G)?(.*)$ (see optionalPrefix),
// which Go's ReplaceAll applies once: a text with a line break has no match (neither G nor .
// matches one, and $ is the text's end) and stays; any other is the whole match, its group 1
// the first match of G at the start (leftmost-first, as Go's find, CEL's find, takes it; the rest
// always matches), "" where none, and group 2 what follows.
func (c *lowering) optionalPrefixReplace(name, g, pat string, literal bool, args []value) (value, error) {
	repl, ok := stringLiteral(args[2])
	if !ok {
		return value{}, c.refuse("%s's replacement must be a string literal ('...')", name)
	}
	if err := textOnly(c, name, args[1]); err != nil {
		return value{}, err
	}
	// The replacement, as parts: text (group -1), or a group of the match.
	parts := []replacementPart{{text: repl, group: -1}}
	if !literal {
		if parts, ok = expandReplacement(regexp.MustCompile(pat), repl, 2); !ok {
			return value{}, c.refuse("%s's replacement holds private-use characters U+E000-U+E002: not supported", name)
		}
	}
	e := c.onString(name, args[1], func(x cel.Expr) cel.Expr {
		return c.bind(cel.Method(x, "find", cel.Str(g)), false, func(p cel.Expr) cel.Expr {
			out := joinParts(parts, func(group int) cel.Expr {
				switch group {
				case 0:
					return x
				case 1:
					return p
				}
				return cel.Method(x, "substring", cel.Call("size", p))
			})
			return cel.Cond(cel.Method(x, "contains", cel.Str("\n")), x, out)
		})
	})
	v := found(e, tStr, false)
	v.tame = args[1].tame & tameOf(repl) // pieces of the text and the replacement
	return v, nil
}

// joinParts is the CEL concatenation of an expanded replacement's parts: its text, and
// group(g) for group g ("" for none).
func joinParts(parts []replacementPart, group func(g int) cel.Expr) cel.Expr {
	var out cel.Expr
	for _, p := range parts {
		e := cel.Expr(cel.Str(p.text))
		if p.group >= 0 {
			e = group(p.group)
		}
		if out == nil {
			out = e
		} else {
			out = cel.Bin("+", out, e)
		}
	}
	if out == nil {
		out = cel.Str("")
	}
	return out
}

// expandReplacement expands repl as Go's Regexp.ExpandString does ($1, ${1}, a group's name, $$,
// an unknown or malformed reference such as $1x, which names group "1x": empty), for a match
// whose groups 0 to n hold markers, into parts: text, or a group's text. ok is false where repl
// holds a marker itself.
func expandReplacement(re *regexp.Regexp, repl string, n int) (parts []replacementPart, ok bool) {
	var src string
	var match []int
	for g := 0; g <= n; g++ {
		m := string(rune(0xE000 + g)) // private-use characters, as markers
		if strings.Contains(repl, m) {
			return nil, false
		}
		match = append(match, len(src), len(src)+len(m))
		src += m
	}
	expanded := string(re.ExpandString(nil, repl, src, match))
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, replacementPart{text: text.String(), group: -1})
			text.Reset()
		}
	}
	for _, r := range expanded {
		if g := int(r - 0xE000); g >= 0 && g <= n {
			flush()
			parts = append(parts, replacementPart{group: g})
			continue
		}
		text.WriteRune(r)
	}
	flush()
	return parts, true
}

// inClass: is r in the class of ranges (syntax.Regexp.Rune of a character class: pairs lo, hi)?
func inClass(r rune, ranges []rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// anchoredNonEmpty: is the regular expression (Go's syntax, as regexp.Compile reads it) anchored
// at the start of the text, and unable to match the empty text?
func anchoredNonEmpty(pat string) bool {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return false
	}
	re = re.Simplify()
	return re.Op == syntax.OpConcat && len(re.Sub) > 0 && re.Sub[0].Op == syntax.OpBeginText && minLength(re) > 0
}

// minLength is the fewest characters a match of re holds.
func minLength(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minLength(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minLength(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n += minLength(s)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, s := range re.Sub {
			if m := minLength(s); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0 // *, ?, empty matches, anchors and boundaries
}

// patternMatch is pattern_match: Kyverno's wildcards (* and ?), with a pattern literal.
func patternMatch(c *lowering, name string, args []value) (value, error) {
	p, ok := stringLiteral(args[0])
	if !ok {
		return value{}, c.refuse("pattern_match's pattern must be a string literal ('...')")
	}
	if err := textOnly(c, name, args[1]); err != nil {
		return value{}, err
	}
	e := c.onString(name, args[1], func(x cel.Expr) cel.Expr { return Glob(p, x) })
	return found(e, tBool, false), nil
}

// notNull is not_null: the first argument that is not null.
func notNull(c *lowering, name string, args []value) (value, error) {
	t, ascii, tame := tNull, true, tameWord
	for _, a := range args {
		t = t&^tNull | a.t
		ascii, tame = ascii && a.ascii, tame&a.tame
		if a.t&tNull == 0 {
			break
		}
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		var out cel.Expr = cel.Null()
		for i := len(a) - 1; i >= 0; i-- {
			out = cel.Cond(cel.Bin("!=", dyn(a[i].e), cel.Null()), dyn(a[i].e), out)
		}
		return out
	})
	v := found(e, t, false)
	v.ascii, v.tame = ascii, tame
	return v, nil
}

// jmesType is type: JMESPath's name of the value's type (go-jmespath's jpfType). A number is
// "number" as a float64 and fails the rule as an int64, and the object's numbers reach Kyverno
// as either: a value that can be a number is supported only when JMESPath made it (a float64).
func jmesType(c *lowering, name string, args []value) (value, error) {
	a := args[0]
	if a.t&(tInt|tDouble) != 0 && !a.jnum {
		return value{}, c.refuse("%s of a value that can be a number from the object is not supported: Kyverno gives \"number\" for a float64 and fails the rule for an int64, and the object's numbers reach it as either", name)
	}
	e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
		t := cel.Call("type", dyn(x))
		is := func(n string) cel.Expr { return cel.Bin("==", t, cel.Ident(n)) }
		return cel.Cond(is("string"), cel.Str("string"), cel.Cond(cel.Or(is("int"), is("double")), cel.Str("number"),
			cel.Cond(is("bool"), cel.Str("boolean"), cel.Cond(is("list"), cel.Str("array"), cel.Cond(is("map"), cel.Str("object"), cel.Str("null"))))))
	})
	v := found(e, tStr, false)
	v.ascii = true
	return v, nil
}

// itemTypes is the types of the items of a, where a is an array: as the function that made it
// says, or the schema.
func itemTypes(a value) types {
	if a.items != 0 {
		return a.items
	}
	return a.sh.item().types()
}

// needs refuses name where the target's CEL lacks a library it is lowered with (want): ext.Lists
// v3 (sort, reverse, distinct), two-variable comprehensions (transformMap, transformMapEntry) and the API
// server's semver library, which it has for new expressions from Kubernetes 1.35, 1.33 and 1.34.
func needs(c *lowering, name string, want cel.Features) error {
	f := c.sc.Features
	switch {
	case want.Lists && !f.Lists:
		return c.refuse("%s needs CEL's lists library (sort, reverse, distinct), which the API server has for new expressions from Kubernetes 1.35: compile for 1.35 or later (--kubernetes-version)", name)
	case want.TwoVar && !f.TwoVar:
		return c.refuse("%s needs CEL's two-variable comprehensions (transformMap, transformMapEntry), which the API server has for new expressions from Kubernetes 1.33: compile for 1.33 or later (--kubernetes-version)", name)
	case want.Semver && !f.Semver:
		return c.refuse("%s needs the API server's semver library (semver, isSemver, compareTo), which it has for new expressions from Kubernetes 1.34: compile for 1.34 or later (--kubernetes-version)", name)
	}
	return nil
}

// sortArray is sort: Kyverno's JMESPath sorts an array of numbers (float64s only) or of strings
// and fails on anything else. It is lowered for arrays whose items cannot be numbers (the
// object's numbers reach Kyverno as float64 or int64): CEL's sort orders strings by their bytes,
// as Go's sort does, and an array that holds anything but strings fails, as in Kyverno.
func sortArray(c *lowering, name string, args []value) (value, error) {
	if err := needs(c, name, cel.Features{Lists: true}); err != nil {
		return value{}, err
	}
	a := args[0]
	it := itemTypes(a)
	if a.t&tList == 0 {
		return value{}, c.refuse("%s of a value that cannot be an array: Kyverno fails the rule", name)
	}
	if it&(tInt|tDouble) != 0 {
		return value{}, c.refuse("%s of an array that can hold numbers is not supported: Kyverno sorts float64 numbers only and fails on an int64, and the object's numbers reach it as either", name)
	}
	why := name + ": not an array of strings or numbers: Kyverno fails the rule"
	e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
		var body cel.Expr = cel.Method(dyn(x), "sort")
		if !it.only(tStr) {
			item := c.fresh()
			body = cel.Cond(cel.Method(dyn(x), "all", item, isType(item, "string")), body, fail(why))
		}
		if !a.t.only(tList) {
			body = cel.Cond(isType(x, "list"), body, fail(why))
		}
		return body
	})
	v := found(e, tList, false)
	v.items = tStr
	return v, nil
}

// reverse is reverse: an array's items, or a string's characters, in reverse order; anything else
// fails the rule. CEL reverses a list; a string is split into its characters, reversed and
// joined (the API server's CEL has no string reverse).
func reverse(c *lowering, name string, args []value) (value, error) {
	if err := needs(c, name, cel.Features{Lists: true}); err != nil {
		return value{}, err
	}
	a := args[0]
	t := a.t & (tList | tStr)
	if t == 0 {
		return value{}, c.refuse("%s of a value that is neither an array nor a string: Kyverno fails the rule", name)
	}
	e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
		list := cel.Method(dyn(x), "reverse")
		str := cel.Method(cel.Method(cel.Method(dyn(x), "split", cel.Str("")), "reverse"), "join")
		switch {
		case a.t.only(tList):
			return list
		case a.t.only(tStr):
			return str
		}
		out := fail(name + ": not an array or a string: Kyverno fails the rule")
		if t&tStr != 0 {
			out = cel.Cond(isType(x, "string"), dyn(str), out)
		}
		if t&tList != 0 {
			out = cel.Cond(isType(x, "list"), dyn(list), out)
		}
		return out
	})
	v := found(e, t, false)
	v.ascii = a.ascii
	if t&tList != 0 {
		v.items = itemTypes(a)
		v.sh = a.sh
	}
	return v, nil
}

// mapValueTypes is the types of the values of a, where a is an object: as the schema says (a map's
// additional properties), everything where it says nothing.
func mapValueTypes(a value) types {
	return a.sh.field("\x00").types() // no schema names a field so: the map's values
}

// items is Kyverno's items of an object: its fields sorted by name, each an object of two fields
// named by the string literals keyName (the field's name) and valName (its value; valName wins
// where both are the same name, as Go's map assignment does). CEL lists the object's names, sorts
// them (CEL's lists library: from Kubernetes 1.35) as Go's sort.Strings does, and builds each
// object. Of an array Kyverno makes each index a float64, which the object's numbers are not
// always: refused. Anything else fails the rule.
func items(c *lowering, name string, args []value) (value, error) {
	if err := needs(c, name, cel.Features{Lists: true}); err != nil {
		return value{}, err
	}
	keyName, ok1 := stringLiteral(args[1])
	valName, ok2 := stringLiteral(args[2])
	if !ok1 || !ok2 {
		return value{}, c.refuse("%s's field names (its second and third arguments) must be string literals ('key')", name)
	}
	a := args[0]
	if a.t&tList != 0 {
		return value{}, c.refuse("%s of a value that can be an array is not supported: Kyverno makes each index a float64, and the object's numbers reach its functions as float64 or int64", name)
	}
	if a.t&tMap == 0 {
		return value{}, c.refuse("%s of a value that cannot be an object: Kyverno fails the rule", name)
	}
	e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
		k := c.fresh()
		entry := cel.Map([]cel.Expr{cel.Str(keyName), cel.Str(valName)}, []cel.Expr{dyn(k), dyn(cel.Index(dyn(x), k))})
		if keyName == valName {
			entry = cel.Map([]cel.Expr{cel.Str(valName)}, []cel.Expr{dyn(cel.Index(dyn(x), k))})
		}
		body := cel.Method(cel.Method(cel.Method(dyn(x), "map", k, k), "sort"), "map", k, entry)
		if !a.t.only(tMap) {
			body = cel.Cond(isType(x, "map"), body, fail(name+": not an object or an array: Kyverno fails the rule"))
		}
		return body
	})
	v := found(e, tList, false)
	v.items = tMap
	return v, nil
}

// labelMatch is label_match: does every field of the first object have the same value in the
// second (reflect.DeepEqual)? Lowered where the values of both are strings (labels, selectors'
// matchLabels, annotations): CEL's == then is Go's. Values that can be numbers are refused
// (DeepEqual tells an int64 from a float64, CEL's == does not); anything but objects fails the
// rule.
func labelMatch(c *lowering, name string, args []value) (value, error) {
	for _, a := range args {
		if a.t&tMap == 0 {
			return value{}, c.refuse("%s of a value that cannot be an object: Kyverno fails the rule", name)
		}
		if !mapValueTypes(a).only(tStr) {
			return value{}, c.refuse("%s is supported for objects whose values the schema makes strings (labels, matchLabels, annotations): Kyverno compares values with reflect.DeepEqual, which tells an int64 from a float64", name)
		}
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		l, m := dyn(a[0].e), dyn(a[1].e)
		k := c.fresh()
		body := cel.Method(l, "all", k, cel.And(cel.Bin("in", k, m), cel.Bin("==", cel.Index(m, k), cel.Index(l, k))))
		return typedOnly(body, tMap, "map", name+": not an object: Kyverno fails the rule", a...)
	})
	return found(e, tBool, false), nil
}

// merge is merge: the fields of every object, a later object's value winning. CEL lists each
// object's names that no later object has, and transformMapEntry (two-variable comprehensions:
// Kubernetes 1.33 and later) builds the object, each name with the value of the last object that
// has it. Kyverno does not check a variadic function's arguments: its merge panics on anything
// but an object, so every argument must be one (a default, || `{}`, makes it so).
func merge(c *lowering, name string, args []value) (value, error) {
	if err := needs(c, name, cel.Features{TwoVar: true}); err != nil {
		return value{}, err
	}
	for _, a := range args {
		if !a.t.only(tMap) {
			return value{}, c.refuse("%s of a value that can be something other than an object (null where it is missing) is not supported: Kyverno's merge does not check its arguments and panics on anything but an object; give a default (|| `{}`)", name)
		}
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		ms := make([]cel.Expr, len(a))
		for i, v := range a {
			ms[i] = dyn(v.e)
		}
		k := c.fresh()
		var keys cel.Expr
		for i := len(ms) - 1; i >= 0; i-- {
			var notLater []cel.Expr
			for _, later := range ms[i+1:] {
				notLater = append(notLater, cel.Not(cel.Bin("in", k, later)))
			}
			part := cel.Method(ms[i], "map", k, k)
			if len(notLater) > 0 {
				part = cel.Method(ms[i], "filter", k, cel.And(notLater...))
			}
			if keys == nil {
				keys = part
			} else {
				keys = cel.Bin("+", keys, part)
			}
		}
		idx := c.fresh()
		val := dyn(cel.Index(ms[0], k))
		for _, m := range ms[1:] {
			val = cel.Cond(cel.Bin("in", k, m), dyn(cel.Index(m, k)), val)
		}
		return cel.Method(keys, "transformMapEntry", idx, k, cel.Map([]cel.Expr{k}, []cel.Expr{val}))
	})
	return found(e, tMap, false), nil
}

// objectFromLists is object_from_lists: an object whose names are the first array's items and
// whose values are the second's at the same index (null past its end), a later name winning.
// Lowered for names the schema or a function makes strings (Kyverno writes other items as text in
// ways CEL does not: a float64 with 32 bits of precision, an int64 not at all), for Kubernetes 1.35
// and later: CEL's distinct names, each with the value at its last index (lastIndexOf), built by
// transformMapEntry. Anything but arrays fails the rule.
func objectFromLists(c *lowering, name string, args []value) (value, error) {
	if err := needs(c, name, cel.Features{Lists: true, TwoVar: true}); err != nil {
		return value{}, err
	}
	keys, vals := args[0], args[1]
	if keys.t&tList == 0 || vals.t&tList == 0 {
		return value{}, c.refuse("%s of a value that cannot be an array: Kyverno fails the rule", name)
	}
	if !itemTypes(keys).only(tStr) {
		return value{}, c.refuse("%s is supported for names the schema or a function makes strings (split, a path to strings): Kyverno writes a number as text with 32 bits of precision, and fails on an int64", name)
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		ks, vs := dyn(a[0].e), dyn(a[1].e)
		i := c.fresh()
		k := c.fresh()
		last := cel.Method(ks, "lastIndexOf", k)
		val := cel.Cond(cel.Bin("<", last, cel.Call("size", vs)), dyn(cel.Index(vs, last)), cel.Null())
		body := cel.Method(cel.Method(ks, "distinct"), "transformMapEntry", i, k, cel.Map([]cel.Expr{k}, []cel.Expr{val}))
		return typedOnly(body, tList, "list", name+": not an array: Kyverno fails the rule", a...)
	})
	return found(e, tMap, false), nil
}

// toArray is to_array: an array as it is, anything else in an array of one.
func toArray(c *lowering, name string, args []value) (value, error) {
	a := args[0]
	if a.t.only(tList) {
		return a, nil
	}
	e := c.bind(a.e, a.simple, func(x cel.Expr) cel.Expr {
		if a.t&tList == 0 {
			return cel.List(dyn(x))
		}
		return cel.Cond(isType(x, "list"), dyn(x), dyn(cel.List(dyn(x))))
	})
	v := found(e, tList, false)
	if a.t&tList == 0 {
		v.items = a.t
	}
	return v, nil
}

// lookup is lookup with a literal key: the field of an object (null when missing) for a string,
// the item of an array (null outside it) for a number.
func lookup(c *lowering, name string, args []value) (value, error) {
	m := args[0]
	if k, ok := stringLiteral(args[1]); ok {
		e := c.bind(m.e, m.simple, func(x cel.Expr) cel.Expr {
			return cel.Cond(isType(x, "map"), dyn(cel.Method(cel.OptIndex(dyn(x), cel.Str(k)), "orValue", cel.Null())),
				fail(name+": not an object, for a string key: Kyverno fails the rule"))
		})
		v := found(e, m.sh.field(k).types()|tNull, false)
		v.sh = m.sh.field(k)
		return v, nil
	}
	if f, ok := numberLiteral(args[1]); ok {
		if f != math.Trunc(f) || math.Abs(f) >= 1<<31 {
			return value{}, c.refuse("lookup's index %v is not an integer: Kyverno fails the rule", f)
		}
		i := int64(f)
		e := c.bind(m.e, m.simple, func(x cel.Expr) cel.Expr {
			var item cel.Expr = cel.Null()
			if i >= 0 {
				item = cel.Cond(cel.Bin(">", cel.Call("size", dyn(x)), cel.Int(i)), dyn(cel.Index(dyn(x), cel.Int(i))), cel.Null())
			}
			return cel.Cond(isType(x, "list"), item, fail(name+": not an array, for a number key: Kyverno fails the rule"))
		})
		v := found(e, m.sh.item().types()|tNull, false)
		v.sh = m.sh.item()
		return v, nil
	}
	return value{}, c.refuse("lookup's key must be a string or number literal")
}

// tameness is what is known of a string's characters, as a set of guarantees: whether it holds
// only printable ASCII characters other than ", ' and \, which spliced into a quoted YAML scalar
// (as Kyverno splices a variable's text into patchesJson6902) are read as themselves; and whether
// it holds only printable ASCII characters other than the space, which spliced into a plain
// (unquoted) scalar after a literal are read as themselves. Each guarantee holds in every object
// the API server stores (a label's value, a container's name: the request carries the object
// before validation, see tameCheck), or whatever the request. A string made of two others has
// the guarantees both have (a & b).
type tameness uint8

const (
	tameNo tameness = 0 // nothing known

	tameValid  tameness = 1 << iota // quote-free in every object the API server stores
	tameAlways                      // quote-free whatever the request
	wordValid                       // space-free in every object the API server stores
	wordAlways                      // space-free whatever the request

	tameYes   = tameValid | tameAlways                          // quote-free whatever the request
	tameShape = tameValid | wordValid                           // a name, a label's value, an image
	tameWord  = tameValid | tameAlways | wordValid | wordAlways // both whatever the request
)

// tameOf is s's tameness.
func tameOf(s string) tameness {
	t := tameWord
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return tameNo
		}
		if s[i] == '"' || s[i] == '\'' || s[i] == '\\' {
			t &^= tameYes
		}
		if s[i] == ' ' {
			t &^= wordValid | wordAlways
		}
	}
	return t
}

// isASCII: is s all ASCII?
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
