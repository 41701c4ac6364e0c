package cel

import (
	"strings"

	"github.com/mapc-dev/mapc/compiler/ir"
)

// Gatekeeper's AssignImage splits a reference into domain, path and tag (pkg/mutation/mutators/
// assignimage/imageparser.go): the first "/"-separated segment is a domain only if it contains
// "." or ":" or is "localhost"; the tag starts at the first ":" or "@" of the rest. Each part the
// mutator sets replaces the old one; the others stay.

// domainPrefix matches a leading domain segment with its slash, as splitDomain recognises it.
const domainPrefix = `^([^/]*[.:][^/]*|localhost)/`

// RewriteImage is the CEL string expression of Gatekeeper's mutateImage(domain, path, tag, img).
func RewriteImage(img Expr, op ir.RewriteImage) Expr {
	hasDomain := Method(img, "matches", Str(domainPrefix))
	domainWithSlash := Method(img, "find", Str(`^[^/]*/`))
	rest := Cond(hasDomain, Method(img, "substring", Call("size", domainWithSlash)), img)
	var domain Expr
	if op.Domain != "" {
		domain = Str(op.Domain + "/")
	} else {
		domain = Cond(hasDomain, domainWithSlash, Str(""))
	}
	pathOf := Method(rest, "find", Str(`^[^:@]*`))
	var path, tag Expr
	if op.Path != "" {
		path = Str(op.Path)
	} else {
		path = pathOf
	}
	if op.Tag != "" {
		tag = Str(op.Tag)
	} else {
		tag = Method(rest, "substring", Call("size", pathOf))
	}
	return Bin("+", Bin("+", domain, path), tag)
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
