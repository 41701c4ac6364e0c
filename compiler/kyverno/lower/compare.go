package lower

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mapc-dev/mapc/cel"
)

// condValue is a condition's string value as Kyverno's operators (pkg/engine/variables/operator)
// read it: each parser they try, and what it gives.
type condValue struct {
	s       string
	dur     bool // time.ParseDuration reads it, and it is not "0" (operator.go parseDuration)
	qty     bool // resource.ParseQuantity reads it
	q       resource.Quantity
	flt     bool // strconv.ParseFloat reads it
	f       float64
	integer bool // strconv.ParseInt reads it (base 10)
	i       int64
	version bool // semver.Parse reads it
}

func readCondValue(s string) condValue {
	l := condValue{s: s}
	if _, err := time.ParseDuration(s); err == nil && s != "0" {
		l.dur = true
	}
	if q, err := resource.ParseQuantity(s); err == nil {
		l.qty, l.q = true, q
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		l.flt, l.f = true, f
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		l.integer, l.i = true, i
	}
	if _, err := semver.Parse(s); err == nil {
		l.version = true
	}
	return l
}

// durationWhy is why a key that can be a string (or a number) is not compared with a duration.
const durationWhy = "Kyverno reads a string key with Go's time.ParseDuration and, where that fails " +
	"(past 292 years it overflows), goes on as if the key were not a duration; CEL's duration() is the " +
	"same parser but fails the whole expression there, and no CEL test tells the two apart exactly"

// numberStringKeyWhy is why a number value is not compared with a key that can be a string.
const numberStringKeyWhy = "the value is a number and the key can be a string, which Kyverno reads as a " +
	"duration where Go's time.ParseDuration does (the number then counts seconds, with " +
	"time.Duration(value)*time.Second, and a string that overflows is read as no duration at all), " +
	"which no CEL test reproduces exactly; not supported: compare a field the object's schema " +
	"makes a number, or keep this rule on Kyverno"

// durationNumberWhy is why a key that can be a number is not compared with a duration.
const durationNumberWhy = "Kyverno reads a number key as seconds with Go's time.Duration(key)*time.Second, " +
	"which wraps around past 292 years where CEL's arithmetic fails"

// floatWhy is why a key that can be a string is not compared with a value that reads as a number.
const floatWhy = "Kyverno compares a string key that is not a quantity as a float64 when Go's strconv.ParseFloat " +
	"reads it (hexadecimal floats, digits with underscores, Inf, NaN), and CEL's double() fails the " +
	"expression on those of them that overflow"

// maxExact is the magnitude up to which every integer is a float64.
const maxExact = 1 << 53

// keyType is the test that the run-time key k has CEL type t.
func keyType(k cel.Expr, t string) cel.Expr {
	return cel.Bin("==", cel.Call("type", k), cel.Ident(t))
}

// equals is Kyverno's Equals (operator/equal.go) of the run-time key, of types kt, and a condValue
// value; with not, NotEquals (notequal.go), which is its negation for every key but null: both
// are false for a null key.
func equals(key cel.Expr, kt types, val any, field string, not bool) (cel.Expr, error) {
	k := cel.Ident("k")
	var body cel.Expr
	switch v := val.(type) {
	case string:
		// A range ("1-10") is only a string to Equals and NotEquals (Kyverno's set operators
		// read ranges, they do not): no parser of equal.go reads it.
		if strings.HasPrefix(strings.TrimSpace(v), "[") {
			return nil, errorf(field, "%q is a JSON list in a string, which is not supported yet", v)
		}
		l := readCondValue(v)
		// A string key: a duration when both read as one, else a quantity when the key reads
		// as one (never equal when the value does not), else Kyverno's wildcards.
		if l.dur && kt&tStr != 0 {
			return nil, errorf(field, "%q reads as a duration, which Kyverno compares as one with a key that reads as one, and the key can be a string: %s; not supported", v, durationWhy)
		}
		var str cel.Expr
		if l.qty {
			// The value has no wildcard: a key that is not a quantity is never equal to it.
			str = cel.And(cel.Call("isQuantity", k), cel.Bin("==", quantityCmp(k, l), cel.Int(0)))
		} else {
			str = cel.And(cel.Not(cel.Call("isQuantity", k)), Glob(v, k))
		}
		// A number key: an int64 compares with ParseInt's reading, a float64 with ParseFloat's,
		// and the object's integers reach Kyverno as either.
		var asInt, asDouble cel.Expr = cel.False, cel.False
		switch {
		case l.integer && l.i > -maxExact && l.i < maxExact:
			asInt = cel.Bin("==", k, cel.Int(l.i))
		case !l.integer && l.flt && !math.IsInf(l.f, 0) && l.f == math.Trunc(l.f) && kt&tInt != 0:
			return nil, errorf(field, "%q reads as the integer %v with strconv.ParseFloat but not with strconv.ParseInt, and the key can be an integer, which Kyverno compares with one or the other depending on whether it reached it as an int64 or a float64 (decoded from the request, or from the previous rule's result); not supported: write it as digits (%q)", v, l.f, strconv.FormatFloat(l.f, 'f', -1, 64))
		case l.integer && kt&tInt != 0:
			return nil, errorf(field, "%q is an integer past 2^53, and the key can be an integer, which Kyverno compares exactly as an int64 and rounded as a float64 (it reaches it as either); not supported", v)
		}
		if l.flt && !math.IsInf(l.f, 0) && !math.IsNaN(l.f) {
			asDouble = cel.Bin("==", k, cel.Double(l.f))
		}
		body = cel.Cond(keyType(k, "string"), str, cel.Cond(keyType(k, "int"), asInt, cel.Cond(keyType(k, "double"), asDouble, cel.False)))
	case bool:
		body = cel.And(keyType(k, "bool"), cel.Bin("==", k, cel.Bool(v)))
	case int64, float64:
		// Kyverno's Equals of numbers (equal.go): an int64 key equals an int64 value, and an
		// integral float64 value converted to an int64; a float64 key equals a float64 value,
		// and, when the key is integral, an int64 value once the key is converted. So a number
		// key equals a number value when they are the same number, whichever way the key
		// reached Kyverno, as long as the conversions are exact.
		if kt&tStr != 0 {
			return nil, errorf(field, "%s", numberStringKeyWhy)
		}
		f, _ := numberValue(v)
		if i, ok := v.(int64); ok && (i <= -maxExact || i >= maxExact) || f <= -maxExact || f >= maxExact {
			return nil, errorf(field, "%v is past 2^53, where Kyverno's conversions between int64 and float64 are not exact; not supported", v)
		}
		var asInt cel.Expr = cel.False
		if f == math.Trunc(f) {
			asInt = cel.Bin("==", k, cel.Int(int64(f)))
		}
		body = cel.Cond(keyType(k, "int"), asInt, cel.Cond(keyType(k, "double"), cel.Bin("==", k, cel.Double(f)), cel.False))
	case []any, map[string]any:
		// Kyverno compares a list (a map) key with reflect.DeepEqual, and every other key as
		// unequal. Without numbers in the value (the object's reach Kyverno as int64 or float64,
		// which DeepEqual tells apart), that is CEL's equality.
		if hasNumber(v) {
			return nil, errorf(field, "a list or map value with numbers in it is not supported: Kyverno compares it with the key with reflect.DeepEqual, which tells the object's numbers apart by whether they reached it as int64 or float64")
		}
		lit, err := cel.Value(v)
		if err != nil {
			return nil, errorf(field, "%v", err)
		}
		t := "list"
		if _, ok := v.(map[string]any); ok {
			t = "map"
		}
		body = cel.And(keyType(k, t), cel.Bin("==", k, lit))
	default:
		return nil, errorf(field, "a value of type %T is not supported yet (strings, booleans, numbers, and lists and maps of strings and booleans are)", val)
	}
	if not {
		body = cel.And(cel.Bin("!=", cel.Call("type", k), cel.Ident("null_type")), cel.Not(body))
	}
	return cel.Let("k", cel.Call("dyn", key), body), nil
}

// hasNumber: does v hold a number anywhere?
func hasNumber(v any) bool {
	switch x := v.(type) {
	case int64, float64, int:
		return true
	case []any:
		for _, e := range x {
			if hasNumber(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasNumber(e) {
				return true
			}
		}
	}
	return false
}

// numberValue is a condition's number value (an int64 or a float64, as Kubernetes' JSON decoding
// gives Kyverno the policy's numbers) as a float64.
func numberValue(val any) (float64, bool) {
	switch v := val.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// quantityCmp is quantity(k).compareTo(the value's quantity): Kyverno's Quantity.Cmp.
func quantityCmp(k cel.Expr, l condValue) cel.Expr {
	return cel.Method(cel.Call("quantity", k), "compareTo", cel.Call("quantity", cel.Str(l.s)))
}

// numericOps are Kyverno's numeric operators and CEL's comparisons.
var numericOps = map[string]string{
	"greaterthan":         ">",
	"greaterthanorequals": ">=",
	"lessthan":            "<",
	"lessthanorequals":    "<=",
}

// numericCond is GreaterThan, GreaterThanOrEquals, LessThan or LessThanOrEquals (operator/numeric.go)
// of the run-time key, of types kt, and a condValue string value. Kyverno tries, for a string key,
// durations (when both read as one), then quantities (when both do), then the key as a float64,
// an int64, a semantic version; for a number key, a duration value, then the value as a float64.
// Booleans, lists, objects and null compare as false. f says whether the target has the API
// server's semver library.
func numericCond(op string, key cel.Expr, kt types, val any, f cel.Features, field string) (cel.Expr, error) {
	k := cel.Ident("k")
	cmp := numericOps[op]
	if f, ok := numberValue(val); ok {
		// A number key, an int64 or a float64, compares with the value as a float64 (Go's
		// conversion and CEL's double() both round to the nearest); booleans, lists, objects and
		// null as false.
		if kt&tStr != 0 {
			return nil, errorf(field, "%s", numberStringKeyWhy)
		}
		num := cel.Bin(cmp, cel.Call("double", k), cel.Double(f))
		return cel.Let("k", cel.Call("dyn", key), cel.Cond(cel.Or(keyType(k, "int"), keyType(k, "double")), num, cel.False)), nil
	}
	v, ok := val.(string)
	if !ok {
		return nil, errorf(field, "a value of type %T is not supported (strings and numbers are)", val)
	}
	l := readCondValue(v)
	var str, num cel.Expr = cel.False, cel.False
	switch {
	case l.dur:
		if kt&tStr != 0 {
			return nil, errorf(field, "%q reads as a duration, and the key can be a string: %s; not supported", v, durationWhy)
		}
		if kt&(tInt|tDouble) != 0 {
			return nil, errorf(field, "%q reads as a duration, and the key can be a number: %s; not supported", v, durationNumberWhy)
		}
	case l.flt:
		if kt&tStr != 0 {
			return nil, errorf(field, "%q reads as a number, and the key can be a string: %s; not supported", v, floatWhy)
		}
		if math.IsInf(l.f, 0) || math.IsNaN(l.f) {
			return nil, errorf(field, "%q reads as a float64 that is not finite; not supported", v)
		}
		// Kyverno compares an int64 key and a float64 key alike, as float64.
		num = cel.Bin(cmp, cel.Call("double", k), cel.Double(l.f))
	case l.qty:
		// A string key: quantities when it reads as one; otherwise the value reads as neither a
		// float64, an int64 nor a version, and the comparison is false.
		str = cel.And(cel.Call("isQuantity", k), cel.Bin(cmp, quantityCmp(k, l), cel.Int(0)))
	case l.version:
		// A string key that reads as a version compares as one (semver.Parse, as the API
		// server's semver library reads it); one that does not, and every number key, as
		// false: a version has two dots, so the key is then no duration, quantity or number
		// either (nor is the value: Kyverno tries those first).
		if kt&tStr != 0 {
			if !f.Semver {
				return nil, errorf(field, "%q reads as a semantic version, which Kyverno compares as one with a key that reads as one: that needs the API server's semver library, which it has for new expressions from Kubernetes 1.34: compile for 1.34 or later (--kubernetes-version)", v)
			}
			d := cel.Method(cel.Call("semver", k), "compareTo", cel.Call("semver", cel.Str(v)))
			str = cel.And(cel.Call("isSemver", k), cel.Bin(cmp, d, cel.Int(0)))
		}
	}
	// Otherwise the value reads as nothing Kyverno compares: false for every key.
	body := cel.Cond(keyType(k, "string"), str, cel.Cond(cel.Or(keyType(k, "int"), keyType(k, "double")), num, cel.False))
	return cel.Let("k", cel.Call("dyn", key), body), nil
}

// durationOp is DurationGreaterThan and the others (operator/duration.go): a string key is read
// with time.ParseDuration, a number key as seconds; other keys compare as false.
func durationOp(name string, key cel.Expr, kt types, field string) (cel.Expr, error) {
	if kt&tStr != 0 {
		return nil, errorf(field, "%s with a key that can be a string: %s; not supported", name, durationWhy)
	}
	if kt&(tInt|tDouble) != 0 {
		return nil, errorf(field, "%s with a key that can be a number: %s; not supported", name, durationNumberWhy)
	}
	return cel.Let("k", cel.Call("dyn", key), cel.False), nil
}
