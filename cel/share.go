package cel

import (
	"fmt"
	"sort"
)

// ShareParts names the subexpressions that recur across es where naming them shortens the
// policy: each becomes a policy variable (base_1, base_2, ..., numbered in the order returned), and
// every occurrence, in es and in the other named parts, a reference to it. It returns es
// rewritten and the named parts in an order where each refers only to parts before it.
//
// Many mutators' matches share pieces (the request's namespace read where it may be absent,
// the same excluded namespaces, the same kinds): in a policy of thousands of matches, those
// pieces are most of its variables' text. A reference evaluates as the expression in its
// place (see Named), so the result is the same.
//
// A part that is the whole of es[i] takes the name wholes[i] (and es[i] becomes a reference to
// it); wholes are names not taken, distinct from base's.
//
// A part is named when the characters its references save exceed what its variable costs, and
// only when it reads nothing a comprehension binds; a part inside another named part and used
// nowhere else is left in it.
func ShareParts(es []Expr, base string, wholes []string) ([]Expr, []NamedExpr) {
	refLen := len("variables.") + len(base) + 3
	// In how many of es each subexpression's text occurs, and the subexpression.
	count := map[string]int{}
	expr := map[string]Expr{}
	for _, e := range es {
		seen := map[string]bool{}
		var walk func(x Expr)
		walk = func(x Expr) {
			if shareable(x) {
				t := String(x)
				if !seen[t] {
					seen[t] = true
					count[t]++
					if _, ok := expr[t]; !ok {
						expr[t] = x
					}
				}
			}
			eachChild(x, func(k Expr) bool { walk(k); return true })
		}
		walk(e)
	}
	var texts []string
	for t, n := range count {
		if n >= 2 && len(freeIdents(expr[t])) == 0 {
			texts = append(texts, t)
		}
	}
	// Shorter first: a part contains only shorter ones, so this order declares each before the
	// parts that refer to it.
	sort.Slice(texts, func(i, j int) bool {
		if len(texts[i]) != len(texts[j]) {
			return len(texts[i]) < len(texts[j])
		}
		return texts[i] < texts[j]
	})
	names := map[string]string{}
	used := map[string]bool{}
	whole := map[string]string{} // the text of es[i], to wholes[i]
	for i, t := range wholes {
		used[t] = true
		if _, ok := whole[String(es[i])]; !ok {
			whole[String(es[i])] = t
		}
	}
	replace := func(x Expr) Expr {
		out, _ := rewriteTopDown(x, func(y Expr) (Expr, bool) {
			if !shareable(y) {
				return nil, false
			}
			if name, ok := names[String(y)]; ok {
				return VarRef(name), true
			}
			return nil, false
		})
		return out
	}
	isPart := map[string]bool{}
	var chosen []string
	n := 0
	for _, t := range texts {
		// n references instead of n copies, and the variable: its name, its text (with the
		// shorter parts named in it), JSON's keys.
		l := Len(withOperands(expr[t], replace))
		if count[t]*(l-refLen) <= l+refLen+len(`{"name":"","expression":""},`) {
			continue
		}
		name := ""
		for name == "" || used[name] {
			n++
			name = fmt.Sprintf("%s_%d", base, n)
		}
		used[name] = true
		isPart[name] = true
		names[t] = name
		chosen = append(chosen, t)
	}
	texts = chosen
	if len(texts) == 0 {
		return es, nil
	}
	out := make([]Expr, len(es))
	for i, e := range es {
		out[i] = replace(e)
	}
	parts := make([]NamedExpr, len(texts))
	index := map[string]int{}
	for i, t := range texts {
		parts[i] = NamedExpr{Name: names[t], Expr: withOperands(expr[t], replace)}
		index[names[t]] = i
	}
	// References to each part, then, longest first (a part is referenced only from es and
	// from longer parts, settled before it), those referenced nowhere dropped and those
	// referenced once put back in place.
	refs := make([]int, len(parts))
	countRefs := func(x Expr, d int) {
		eachVarRef(x, func(name string) {
			if i, ok := index[name]; ok {
				refs[i] += d
			}
		})
	}
	for _, e := range out {
		countRefs(e, 1)
	}
	for _, p := range parts {
		countRefs(p.Expr, 1)
	}
	keep := make([]bool, len(parts))
	for i := len(parts) - 1; i >= 0; i-- {
		switch refs[i] {
		case 0:
			countRefs(parts[i].Expr, -1)
		case 1:
			inline := func(x Expr) Expr { return inlineRef(x, parts[i]) }
			for k := range out {
				out[k] = inline(out[k])
			}
			for k := i + 1; k < len(parts); k++ {
				if keep[k] {
					parts[k].Expr = inline(parts[k].Expr)
				}
			}
		default:
			keep[i] = true
		}
	}
	// The parts kept, numbered again from 1.
	rename := map[string]string{}
	n = 0
	for i, p := range parts {
		if !keep[i] {
			continue
		}
		name, ok := whole[texts[i]]
		for !ok {
			n++
			name = fmt.Sprintf("%s_%d", base, n)
			ok = !used[name] || isPart[name] // a part's first name is free again
		}
		rename[p.Name] = name
	}
	renamed := func(x Expr) Expr {
		y, _ := rewriteTopDown(x, func(y Expr) (Expr, bool) {
			if v, ok := AsVarRef(y); ok && rename[v] != "" {
				return VarRef(rename[v]), true
			}
			return nil, false
		})
		return y
	}
	for k := range out {
		out[k] = renamed(out[k])
	}
	var named []NamedExpr
	for i, p := range parts {
		if keep[i] {
			named = append(named, NamedExpr{Name: rename[p.Name], Expr: renamed(p.Expr)})
		}
	}
	return out, named
}

// shareable: may x be a named part (an expression that is neither a literal, an identifier
// nor a reference already)?
func shareable(x Expr) bool {
	switch x.(type) {
	case lit, ident:
		return false
	}
	_, ref := AsVarRef(x)
	return !ref
}

// eachVarRef calls fn with the name of every variable x references.
func eachVarRef(x Expr, fn func(string)) {
	if v, ok := AsVarRef(x); ok {
		fn(v)
		return
	}
	eachChild(x, func(k Expr) bool { eachVarRef(k, fn); return true })
}

// inlineRef is x with the references to p replaced by p's expression.
func inlineRef(x Expr, p NamedExpr) Expr {
	out, _ := rewriteTopDown(x, func(y Expr) (Expr, bool) {
		if v, ok := AsVarRef(y); ok && v == p.Name {
			return p.Expr, true
		}
		return nil, false
	})
	return out
}
