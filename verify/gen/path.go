package gen

import (
	"strings"
)

// step is one element of a location: an object field, or a list element selected by key or glob.
type step struct {
	field    string // object step
	list     bool
	keyField string
	keyValue string
	glob     bool
	// n is the schema node the step leads to (the field's value; for a list step, the element).
	n *node
}

// path is a location with the schema nodes it walks.
type path []step

func (p path) last() step { return p[len(p)-1] }

// terminal is the node at the end of the path.
func (p path) terminal() *node { return p.last().n }

// endsInElement reports whether the location names a keyed list element (sidecar style).
func (p path) endsInElement() bool { return p.last().list }

func (p path) clone() path { return append(path(nil), p...) }

// identChar reports whether Gatekeeper's path scanner reads r as part of an identifier.
func identChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-'
}

// needsQuote: the scanner would not read s as one identifier.
func needsQuote(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return true
	}
	for _, r := range s {
		if !identChar(r) {
			return true
		}
	}
	return false
}

func quoteWith(s string, q byte) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, string(q), `\`+string(q))
	return string(q) + s + string(q)
}

// ident writes s as Gatekeeper's parser reads it: quoted when it must be, sometimes when it need
// not be (with either quote), so both spellings are exercised. r may be nil (canonical form).
func ident(r *rng, s string) string {
	if needsQuote(s) {
		if r != nil && r.chance(0.3) {
			return quoteWith(s, '\'')
		}
		return quoteWith(s, '"')
	}
	if r != nil && r.chance(0.08) {
		return quoteWith(s, "\"'"[r.IntN(2)])
	}
	return s
}

// format writes a location, varying the spelling (quotes, spaces) when r is not nil.
func format(r *rng, p path) string {
	var b strings.Builder
	sp := func(p float64) string {
		if r != nil && r.chance(p) {
			return " "
		}
		return ""
	}
	for i, s := range p {
		if !s.list {
			if i > 0 {
				b.WriteString(sp(0.03) + "." + sp(0.03))
			}
			b.WriteString(ident(r, s.field))
			continue
		}
		b.WriteString("[" + sp(0.1) + ident(r, s.keyField) + sp(0.1) + ":")
		if r == nil || !r.chance(0.3) {
			b.WriteString(" ")
		}
		if s.glob {
			b.WriteString("*")
		} else {
			b.WriteString(ident(r, s.keyValue))
		}
		b.WriteString(sp(0.1) + "]")
	}
	return b.String()
}
