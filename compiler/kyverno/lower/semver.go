package lower

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/blang/semver/v4"

	"github.com/mapc-dev/mapc/cel"
)

// comparison is one comparator of a semantic version range: the version compared with v by
// op (==, !=, >, >=, <, <=), v as the text semver.Parse reads.
type comparison struct {
	op, v string
}

// semverRange is the structure of a range as blang/semver's ParseRange (v4.0.0) reads it: a
// disjunction of conjunctions of comparisons. ParseRange gives a function only, so its steps
// are followed here (splitAndTrim, splitORParts, expandWildcardVersion, splitComparatorVersion,
// parseComparator), each as it is written there; TestSemverRange compares the two on every
// range and version it tries. An error is ParseRange's.
func semverRange(s string) ([][]comparison, error) {
	if _, err := semver.ParseRange(s); err != nil {
		return nil, err
	}
	var or [][]comparison
	parts := rangeSplitAndTrim(s)
	var groups [][]string
	last := 0
	for i, p := range parts {
		if p == "||" {
			groups = append(groups, parts[last:i])
			last = i + 1
		}
	}
	groups = append(groups, parts[last:])
	for _, g := range groups {
		if len(g) == 0 {
			// ParseRange makes a nil function of it, which panics where no earlier
			// alternative holds.
			return nil, errEmptyAlternative
		}
		var and []comparison
		for _, ap := range rangeExpandWildcards(g) {
			i := strings.IndexFunc(ap, unicode.IsDigit)
			if i < 0 {
				return nil, fmt.Errorf("internal error: no version in %q", ap)
			}
			op, v := strings.TrimSpace(ap[:i]), ap[i:]
			switch op {
			case "", "=", "==":
				op = "=="
			case "!", "!=":
				op = "!="
			case ">", ">=", "<", "<=":
			default:
				return nil, fmt.Errorf("internal error: comparator %q", op)
			}
			if _, err := semver.Parse(v); err != nil {
				return nil, fmt.Errorf("internal error: version %q: %v", v, err)
			}
			and = append(and, comparison{op, v})
		}
		or = append(or, and)
	}
	return or, nil
}

// errEmptyAlternative is semverRange's error for a range with an empty alternative.
var errEmptyAlternative = errors.New("an empty alternative between two ||, which makes Kyverno's range panic where no alternative before it holds")

// rangeSplitAndTrim is blang/semver's splitAndTrim: the range cut at spaces but after >, < and =,
// each part without spaces.
func rangeSplitAndTrim(s string) (result []string) {
	last := 0
	var lastChar byte
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && lastChar != '>' && lastChar != '<' && lastChar != '=' {
			if last < i-1 {
				result = append(result, s[last:i])
			}
			last = i + 1
		} else if s[i] != ' ' {
			lastChar = s[i]
		}
	}
	if last < len(s)-1 {
		result = append(result, s[last:])
	}
	for i, v := range result {
		result[i] = strings.ReplaceAll(v, " ", "")
	}
	return result
}

// rangeExpandWildcards is blang/semver's expandWildcardVersion on one conjunction: a part with
// an x becomes the comparisons it stands for.
func rangeExpandWildcards(p []string) []string {
	var out []string
	for _, ap := range p {
		if !strings.Contains(ap, "x") {
			out = append(out, ap)
			continue
		}
		i := strings.IndexFunc(ap, unicode.IsDigit)
		if i < 0 {
			out = append(out, ap) // ParseRange fails on it
			continue
		}
		op, v := strings.TrimSpace(ap[:i]), ap[i:]
		fields := strings.Split(v, ".")
		wildcard := 0 // 2: minor (1.x), 3: patch (1.2.x), as the number of fields
		if fields[len(fields)-1] == "x" && (len(fields) == 2 || len(fields) == 3) {
			wildcard = len(fields)
		}
		flat := strings.Replace(strings.Replace(v, ".x.x", ".x", 1), ".x", ".0", 1)
		if len(strings.Split(flat, ".")) == 2 {
			flat += ".0"
		}
		var resultOp string
		increment := false
		switch op {
		case ">":
			resultOp, increment = ">=", true
		case ">=":
			resultOp = ">="
		case "<":
			resultOp = "<"
		case "<=":
			resultOp, increment = "<", true
		case "", "=", "==":
			out = append(out, ">="+flat)
			resultOp, increment = "<", true
		case "!=", "!":
			out = append(out, "<"+flat)
			resultOp, increment = ">=", true
		}
		result := flat
		if increment {
			result = "" // without a wildcard to increment: ParseRange fails on it
			if wildcard != 0 {
				// 1.2.x: the minor version incremented; 1.x: the major one.
				at := wildcard - 2
				fs := strings.Split(flat, ".")
				if n, err := strconv.Atoi(fs[at]); err == nil {
					fs[at] = strconv.Itoa(n + 1)
					result = strings.Join(fs, ".")
				}
			}
		}
		out = append(out, resultOp+result)
	}
	return out
}

// semverCompare is semver_compare: whether a version is in a range. Kyverno reads the version
// with semver.Parse and, where that fails, takes 0.0.0; the range with semver.ParseRange. The
// range must be a literal, read here: each comparison is CEL's compareTo of the version (read by
// the same semver.Parse, isSemver telling where it fails) and the comparison's version. Needs the
// API server's semver library (new expressions from Kubernetes 1.34).
func semverCompare(c *lowering, name string, args []value) (value, error) {
	if err := needs(c, name, cel.Features{Semver: true}); err != nil {
		return value{}, err
	}
	r, ok := stringLiteral(args[1])
	if !ok {
		return value{}, c.refuse("%s with a range that is not a string literal is not supported: mapc reads the range when it compiles the policy; write it as a literal ('>=1.2.0 <2.0.0')", name)
	}
	ranges, err := semverRange(r)
	if err != nil {
		return value{}, c.refuse("%s: the range %q does not parse (%v): Kyverno fails the rule", name, r, err)
	}
	e := c.onString(name, args[0], func(x cel.Expr) cel.Expr {
		zero := cel.Call("semver", cel.Str("0.0.0"))
		v := cel.Cond(cel.Call("isSemver", x), cel.Call("semver", x), zero)
		return c.bind(v, false, func(sv cel.Expr) cel.Expr {
			var or []cel.Expr
			for _, and := range ranges {
				var tests []cel.Expr
				for _, cmp := range and {
					d := cel.Method(sv, "compareTo", cel.Call("semver", cel.Str(cmp.v)))
					tests = append(tests, cel.Bin(cmp.op, d, cel.Int(0))) // compareTo gives -1, 0 or 1
				}
				or = append(or, cel.And(tests...))
			}
			return cel.Or(or...)
		})
	})
	return found(e, tBool, false), nil
}
