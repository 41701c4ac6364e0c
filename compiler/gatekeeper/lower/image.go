package lower

import (
	"strings"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// Gatekeeper's AssignImage splits a reference into domain, path and tag (pkg/mutation/mutators/
// assignimage/imageparser.go): the first "/"-separated segment is a domain only if it contains
// "." or ":" or is "localhost"; the tag starts at the first ":" or "@" of the rest. Each part the
// mutator sets replaces the old one; the others stay.

// RewriteImage is the CEL string expression of Gatekeeper's mutateImage(domain, path, tag, img).
//
// It splits with indexOf and substring rather than regular expressions (the API server charges a
// regular expression match by the product of the lengths, a search by length), and evaluates each
// part once by binding it as the one element of a list mapped over (the environment has no
// cel.bind); only the parts the mutator keeps are computed.
func RewriteImage(img cel.Expr, op ir.RewriteImage) cel.Expr {
	if op.Domain != "" && op.Path != "" && op.Tag != "" {
		return cel.Str(op.Domain + "/" + op.Path + op.Tag)
	}
	// slash: the index of the first "/"; rest: the reference after the first segment when that
	// is a domain (contains "." or ":", or is "localhost"), else all of it; the domain is what
	// comes before rest; endOf: where the tag starts in rest (the first ":" or "@"), else its length.
	const slashName, restName = "img_slash", "img_rest"
	slash, rest := cel.Ident(slashName), cel.Ident(restName)
	first := cel.Method(img, "substring", cel.Int(0), slash)
	isDomain := cel.And(cel.Bin(">=", slash, cel.Int(0)), cel.Or(cel.Method(first, "contains", cel.Str(".")), cel.Method(first, "contains", cel.Str(":")), cel.Bin("==", first, cel.Str("localhost"))))
	restOf := cel.Cond(isDomain, cel.Method(img, "substring", cel.Bin("+", slash, cel.Int(1))), img)
	domain := cel.Method(img, "substring", cel.Int(0), cel.Bin("-", cel.Call("size", img), cel.Call("size", rest)))
	if op.Domain != "" {
		domain = cel.Str(op.Domain + "/")
	}
	if op.Path == "" && op.Tag == "" {
		// Only the domain changes: rest is used once, so it is written in place rather than
		// bound (a binding costs a list and a comprehension, about 30 in the cost model), and so
		// is the slash's index: five calls of indexOf cost less than binding it.
		return cel.Bin("+", domain, cel.Substitute(restOf, slashName, cel.Method(img, "indexOf", cel.Str("/"))))
	}
	colon, at := cel.Method(rest, "indexOf", cel.Str(":")), cel.Method(rest, "indexOf", cel.Str("@"))
	endOf := cel.Cond(cel.And(cel.Bin(">=", at, cel.Int(0)), cel.Or(cel.Bin("<", colon, cel.Int(0)), cel.Bin("<", at, colon))), at,
		cel.Cond(cel.Bin(">=", colon, cel.Int(0)), colon, cel.Call("size", rest)))
	// At most one of path and tag is kept from rest (both kept means only the domain changes,
	// above), so the end of the path is needed at most once and is written in place.
	var path, tag cel.Expr = cel.Str(op.Path), cel.Str(op.Tag)
	if op.Path == "" {
		path = cel.Method(rest, "substring", cel.Int(0), endOf)
	}
	if op.Tag == "" {
		tag = cel.Method(rest, "substring", endOf)
	}
	body := cel.Bin("+", cel.Bin("+", domain, path), tag)
	return cel.Let(slashName, cel.Method(img, "indexOf", cel.Str("/")), cel.Let(restName, restOf, body))
}

// ConstantImage is the reference an AssignImage writes whatever the image was, when it sets
// every part of it (domain, path and tag).
func ConstantImage(op ir.RewriteImage) (string, bool) {
	if op.Domain == "" || op.Path == "" || op.Tag == "" {
		return "", false
	}
	c := RewriteImageString("", op)
	for _, img := range []string{"nginx", "a.io/b/c:d", "localhost:5000/x@sha256:0"} {
		if RewriteImageString(img, op) != c {
			return "", false
		}
	}
	return c, true
}

// RewriteImageString is the same function at compile time (for a missing field, img is "").
func RewriteImageString(img string, op ir.RewriteImage) string {
	domain, rest := "", img
	if i := strings.IndexRune(img, '/'); i >= 0 && (strings.ContainsAny(img[:i], ".:") || img[:i] == "localhost") {
		domain, rest = img[:i], img[i+1:]
	}
	path, tag := rest, ""
	if i := strings.IndexAny(rest, ":@"); i >= 0 {
		path, tag = rest[:i], rest[i:]
	}
	if op.Domain != "" {
		domain = op.Domain
	}
	if op.Path != "" {
		path = op.Path
	}
	if op.Tag != "" {
		tag = op.Tag
	}
	if domain != "" {
		domain += "/"
	}
	return domain + path + tag
}
