package lower

import (
	"strings"

	"github.com/mapc-dev/mapc/cel"
)

// saPrefixLen is the length in bytes of "system:serviceaccount:", the prefix Kyverno cuts from
// the request's user name (without checking that it is there).
const saPrefixLen = 22

// serviceAccount is serviceAccountName (nth 1) or serviceAccountNamespace (nth 0), as Kyverno's
// context computes them (pkg/engine/context AddServiceAccount) from the request's user name u:
// nothing when u has at most 22 bytes, else u's bytes after the 22nd, split at ":"; with two
// parts or more, the namespace is the first and the name the second, else both are "". They are
// always strings ("" for a user that is not a service account), never missing.
//
// Kyverno cuts bytes; CEL's strings count characters. Where the first 22 bytes are 22 characters
// (ASCII, as every service account's user name) the cut is u.substring(22). Otherwise the cut is
// after the k characters that fit in 22 bytes, and when the 22nd byte ends inside a character,
// the namespace begins with that character's remaining bytes, which are not UTF-8: CEL holds
// each as U+FFFD, as Go's JSON writes it into the patched object (see value.lossy).
func (c *lowering) serviceAccount(nth int64) value {
	u := cel.Field(cel.Field(request, "userInfo"), "username")
	bytesOf := func(s cel.Expr) cel.Expr { return cel.Call("size", cel.Call("bytes", s)) }
	prefix := func(n cel.Expr) cel.Expr { return cel.Method(u, "substring", cel.Int(0), n) }
	n := cel.Int(saPrefixLen)
	// k: how many characters fit in the first 22 bytes (at least one: a character has at
	// most 4 bytes).
	var upto []cel.Expr
	for i := int64(1); i <= saPrefixLen; i++ {
		upto = append(upto, cel.Int(i))
	}
	i := cel.Ident("jpi")
	count := cel.Method(cel.Method(cel.List(upto...), "filter", i,
		cel.And(cel.Bin("<=", i, cel.Call("size", u)), cel.Bin("<=", bytesOf(prefix(i)), n))), "size")
	general := c.bind(count, false, func(k cel.Expr) cel.Expr {
		k1 := cel.Bin("+", k, cel.Int(1))
		split := cel.Bin("+",
			cel.Index(cel.List(cel.Str(""), cel.Str("\ufffd"), cel.Str(strings.Repeat("\ufffd", 2)), cel.Str(strings.Repeat("\ufffd", 3))),
				cel.Bin("-", bytesOf(prefix(k1)), n)),
			cel.Method(u, "substring", k1))
		return cel.Cond(cel.Bin("==", bytesOf(prefix(k)), n), cel.Method(u, "substring", k), split)
	})
	rest := cel.Cond(cel.Bin("<=", bytesOf(u), n), cel.Str(""),
		cel.Cond(cel.And(cel.Bin(">=", cel.Call("size", u), n), cel.Bin("==", bytesOf(prefix(n)), n)),
			cel.Method(u, "substring", n), general))
	e := c.bind(cel.Method(rest, "split", cel.Str(":")), false, func(parts cel.Expr) cel.Expr {
		return cel.Cond(cel.Bin(">=", cel.Call("size", parts), cel.Int(2)), cel.Index(parts, cel.Int(nth)), cel.Str(""))
	})
	v := found(e, tStr, false)
	v.lossy = nth == 0
	return v
}

// hasReplacement: does v (a literal) hold U+FFFD in a string? A lossy value (see value.lossy)
// compares with it unlike Kyverno's.
func hasReplacement(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, '\ufffd')
	case []any:
		for _, e := range x {
			if hasReplacement(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if hasReplacement(k) || hasReplacement(e) {
				return true
			}
		}
	}
	return false
}
