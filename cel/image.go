package cel

import (
	"strings"

	"github.com/mapc-dev/mapc/compiler/ir"
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
func RewriteImage(img Expr, op ir.RewriteImage) Expr {
	if op.Domain != "" && op.Path != "" && op.Tag != "" {
		return Str(op.Domain + "/" + op.Path + op.Tag)
	}
	// slash: the index of the first "/"; rest: the reference after the first segment when that
	// is a domain (contains "." or ":", or is "localhost"), else all of it; the domain is what
	// comes before rest; endOf: where the tag starts in rest (the first ":" or "@"), else its length.
	slash, rest := Ident("img_slash"), Ident("img_rest")
	first := Method(img, "substring", Int(0), slash)
	isDomain := And(Bin(">=", slash, Int(0)), Or(Method(first, "contains", Str(".")), Method(first, "contains", Str(":")), Bin("==", first, Str("localhost"))))
	restOf := Cond(isDomain, Method(img, "substring", Bin("+", slash, Int(1))), img)
	domain := Method(img, "substring", Int(0), Bin("-", Call("size", img), Call("size", rest)))
	if op.Domain != "" {
		domain = Str(op.Domain + "/")
	}
	if op.Path == "" && op.Tag == "" {
		// Only the domain changes: rest is used once, so it is written in place rather than
		// bound (a binding costs a list and a comprehension, about 30 in the cost model), and so
		// is the slash's index: five calls of indexOf cost less than binding it.
		return Bin("+", domain, substitute(restOf, slash.(ident).name, Method(img, "indexOf", Str("/"))))
	}
	colon, at := Method(rest, "indexOf", Str(":")), Method(rest, "indexOf", Str("@"))
	endOf := Cond(And(Bin(">=", at, Int(0)), Or(Bin("<", colon, Int(0)), Bin("<", at, colon))), at,
		Cond(Bin(">=", colon, Int(0)), colon, Call("size", rest)))
	// At most one of path and tag is kept from rest (both kept means only the domain changes,
	// above), so the end of the path is needed at most once and is written in place.
	var path, tag Expr = Str(op.Path), Str(op.Tag)
	if op.Path == "" {
		path = Method(rest, "substring", Int(0), endOf)
	}
	if op.Tag == "" {
		tag = Method(rest, "substring", endOf)
	}
	body := Bin("+", Bin("+", domain, path), tag)
	return let(slash, Method(img, "indexOf", Str("/")), let(rest, restOf, body))
}

// substitute replaces the identifier name by with in e (no comprehension in e rebinds name).
func substitute(e Expr, name string, with Expr) Expr {
	return transform(e, func(x Expr) Expr {
		if id, ok := x.(ident); ok && id.name == name {
			return with
		}
		return x
	})
}

// let is body with name bound to the value of init, evaluated once: [init].map(name, body)[0].
func let(name, init, body Expr) Expr {
	return Index(Method(List(init), "map", name, body), Int(0))
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
