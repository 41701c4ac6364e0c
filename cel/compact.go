package cel

import (
	"sort"
	"strings"
)

// Compaction: the same list of JSONPatch operations, for less of the API server's CEL cost.
//
// The API server charges each list it creates 10, each object (a JSONPatch operation) 40 and
// every presence test, index and comparison 1 (cel-go's runtime cost model). A fused expression is
// a concatenation of one part per mutator, each a tree of presence tests whose leaves are [] or a
// few operations; most leaves are [] on a given object, and consecutive parts repeat the same
// tests. Compact rewrites a concatenation into one that gives the same object when its
// operations are applied in order:
//
//   - (c ? a : b) + (c ? x : y) becomes c ? a + x : b + y (c is evaluated once; CEL has no side
//     effects, and c fails or not alike); parts with the same first condition are grouped so,
//     moving only past parts whose operations commute with theirs (see CompactTerms);
//   - [] is dropped from a concatenation;
//   - a run of two or more parts that each give at most one operation (or a list literal)
//     becomes one list literal with optional elements: (c ? [p] : []) + [q] + (d ? [] : [r])
//     becomes [?(c ? optional.of(p) : optional.none()), q, ?(d ? optional.none() : optional.of(r))];
//   - in a list literal, an "add" below the path of an earlier "add" of an object literal is
//     folded into that literal when nothing in between touches the node (foldAdds);
//   - a conditional creation of a missing node moves forward, past parts that do not touch
//     the node, into the first part that does when it tests the same condition
//     (sinkCreations), so that the writes below the node can be folded into the creation;
//   - the appends of later parts to a list where it is missing are written into the list a
//     part creates there (foldAppends).
//
// It descends into branches and into the bodies of transformList(...).flatten() loops.

// optList is a list literal whose elements marked opt are optionals (written ?e): an element
// only when the optional has a value.
type optList struct {
	elems []Expr
	opt   []bool
}

func (l optList) write(b *writer) {
	b.WriteByte('[')
	for i, e := range l.elems {
		if i > 0 {
			b.WriteString(", ")
		}
		if l.opt[i] {
			b.WriteByte('?')
		}
		e.write(b)
	}
	b.WriteByte(']')
}

// Compact rewrites the JSONPatch list expression e as described above (see CompactTerms for
// what e must be).
func Compact(e Expr) Expr { return join(CompactTerms(flatten(e, "+"))) }

// CompactTerms is Compact for a concatenation given as its operands; it returns the operands of
// the result.
//
// The operands must be the parts of a fused batch (or, below a condition or in a shared loop,
// their branches and bodies): the operations of pairwise independent steps, which may be
// reordered, but for appends to one list (whose order is the order of the new elements), and
// shared creations (SharedCreation), which must stay before what follows them. Parts are
// grouped by their first condition (the test of the first node on a step's path, or its guard),
// each group where its first member was, so that every part only moves earlier, and never past a
// part holding a shared creation.
func CompactTerms(ts []Expr) []Expr {
	ts = sinkCreations(foldAppends(ts))
	var out []Expr
	at := map[string]int{} // first condition -> index in out
	var pres []int         // the indexes in out holding shared creations
	var apps [][]string    // appends(out[i]) once asked for (done[i]), kept up to date
	var done []bool
	appsOf := func(k int) []string {
		if !done[k] {
			apps[k], done[k] = appends(out[k]), true
		}
		return apps[k]
	}
	// movable: may t (appending to ap) move before every part of out after i?
	movable := func(t Expr, ap []string, i int) bool {
		for _, k := range pres {
			if k > i && !disjoint(t, out[k]) {
				return false
			}
		}
		if len(ap) > 0 {
			for k := i + 1; k < len(out); k++ {
				if !apart(ap, appsOf(k)) {
					return false
				}
			}
		}
		return true
	}
	for _, t := range ts {
		if isEmpty(t) {
			continue
		}
		if b, ok := t.(cond); ok {
			key := String(b.c)
			var ap []string
			i, seen := at[key]
			if seen {
				ap = appends(t)
			}
			if seen && movable(t, ap, i) {
				a := out[i].(cond)
				out[i] = cond{a.c, Bin("+", a.t, b.t), Bin("+", a.f, b.f)}
				if done[i] {
					apps[i] = append(apps[i], ap...)
				}
				if hasPre(t) && (len(pres) == 0 || pres[len(pres)-1] != i) {
					pres = append(pres, i)
					sort.Ints(pres)
				}
				continue
			}
			at[key] = len(out)
		}
		if hasPre(t) {
			pres = append(pres, len(out))
		}
		out = append(out, t)
		apps, done = append(apps, nil), append(done, false)
	}
	out = distribute(out)
	for i, t := range out {
		out[i] = compactTerm(t)
	}
	var kept []Expr
	for _, t := range out {
		if !isEmpty(t) {
			kept = append(kept, t)
		}
	}
	return optionalRuns(kept)
}

// sinkCreations moves each conditional term holding shared creations, c ? A : B, forward past
// the terms whose operations commute with its own (disjoint), into the first term that does not
// when that one tests the same first condition, c ? X : Y, which becomes c ? A + X : B + Y. The
// creations still come before every operation below the nodes they create, and now share a branch
// with them: a loop body's creation of a container's missing securityContext and the writes of
// its members, each under its own test of the node, are then grouped by that test (CompactTerms),
// and foldAdds writes the members into the created object, one operation where there were one
// per member. A term whose first later dependant tests another condition stays where it is.
func sinkCreations(ts []Expr) []Expr {
	ts = append([]Expr(nil), ts...) // the caller's slice is not ours to change
	// The last first: a creation below another one's node (a container's resources.limits below
	// its resources) goes to its own dependant, and the one above it can then follow it there.
	for i := len(ts) - 1; i >= 0; i-- {
		p, ok := ts[i].(cond)
		if !ok || !hasPre(p) {
			continue
		}
		for j := i + 1; j < len(ts); j++ {
			if disjoint(p, ts[j]) {
				continue
			}
			if t, ok := ts[j].(cond); ok && j > i+1 && String(t.c) == String(p.c) {
				ts[j] = cond{p.c, Bin("+", p.t, t.t), Bin("+", p.f, t.f)}
				ts = append(ts[:i], ts[i+1:]...)
			}
			break
		}
	}
	return ts
}

// foldAppends writes, into a conditional creation of a missing list,
//
//	G ? (T ? [] : [add L []]) : []
//
// the appends of later terms to that list where it is missing, each under a condition d that is
// one of G's disjuncts,
//
//	d ? (T ? X : [add L/- v]) : []     becomes     d ? (T ? X : []) : []
//
// and the creation becomes G ? (T ? [] : [add L [?(d ? optional.of(v) : optional.none()), ...]]) : [].
// Every term computes from the same object, so T is the same test everywhere: where the list is
// missing, the creation ran (d implies G) and each append added its element after it, in the
// terms' order, which the new list keeps; where it is there, nothing moved. An append moves only
// past terms whose operations commute with it (disjoint) or that are appends folded here, whose
// other operations run only where the list is there. A container missing its env and given
// four variables: one operation instead of five.
func foldAppends(ts []Expr) []Expr {
	var out []Expr
	for i := 0; i < len(ts); i++ {
		create, test, g, ok := listCreation(ts[i])
		if !ok {
			continue
		}
		if out == nil {
			out = append([]Expr(nil), ts...) // the caller's slice is not ours to change
		}
		_, base, rel, _, _ := readOp(create)
		disjuncts := map[string]bool{}
		for _, d := range flatten(g, "||") {
			disjuncts[String(d)] = true
		}
		var elems []Expr
		folded := map[int]bool{}
		for j := i + 1; j < len(out); j++ {
			d, x, v, op, ok := missingAppend(out[j], test, base, rel+"/-")
			if ok && disjuncts[String(d)] && movesBefore(op, out, i, j, folded) {
				elems = append(elems, Cond(d, Method(Ident("optional"), "of", Call("dyn", undyn(v))), Method(Ident("optional"), "none")))
				out[j] = cond{d, cond{test, x, emptyList}, emptyList}
				folded[j] = true
			}
		}
		if len(elems) == 0 {
			continue
		}
		opt := make([]bool, len(elems))
		for k := range opt {
			opt[k] = true
		}
		out[i] = cond{g, cond{test, emptyList, List(withValue(create, optList{elems, opt}))}, emptyList}
	}
	if out == nil {
		return ts
	}
	return out
}

// listCreation matches G ? (T ? [] : [add L []]) : [], an "add" of an empty list whose path ends
// in a static string.
func listCreation(t Expr) (create, test, g Expr, ok bool) {
	c, isCond := t.(cond)
	if !isCond || !isEmpty(c.f) {
		return nil, nil, nil, false
	}
	in, isCond := c.t.(cond)
	if !isCond || !isEmpty(in.t) {
		return nil, nil, nil, false
	}
	l, isList := in.f.(listExpr)
	if !isList || len(l.elems) != 1 {
		return nil, nil, nil, false
	}
	op, _, _, value, ok := readOp(l.elems[0])
	if v, isList := value.(listExpr); !ok || op != "add" || !isList || len(v.elems) != 0 {
		return nil, nil, nil, false
	}
	return l.elems[0], in.c, c.c, true
}

// missingAppend matches d ? (test ? X : [add base+rel v]) : [], returning d, X, v and the append.
func missingAppend(t, test Expr, base, rel string) (d, x, v, op Expr, ok bool) {
	c, isCond := t.(cond)
	if !isCond || !isEmpty(c.f) {
		return nil, nil, nil, nil, false
	}
	in, isCond := c.t.(cond)
	if !isCond || String(in.c) != String(test) {
		return nil, nil, nil, nil, false
	}
	l, isList := in.f.(listExpr)
	if !isList || len(l.elems) != 1 || hasPre(l) {
		return nil, nil, nil, nil, false
	}
	o, b, r, value, ok := readOp(l.elems[0])
	if !ok || o != "add" || b != base || r != rel {
		return nil, nil, nil, nil, false
	}
	return c.c, in.t, value, l, true
}

// movesBefore: may op (of ts[j]) move to ts[i], past the terms in between? Each must commute
// with it, or be an append folded before (folded), whose other operations run only where the
// list is there.
func movesBefore(op Expr, ts []Expr, i, j int, folded map[int]bool) bool {
	for k := i + 1; k < j; k++ {
		if !folded[k] && !disjoint(op, ts[k]) {
			return false
		}
	}
	return true
}

// appends lists the paths of the lists e's operations append to ("add" at ".../-"), whether or
// not its other operations' paths can be read: static paths as they are, paths computed in a
// loop as their static beginning, "*" and their static end.
func appends(e Expr) []string {
	var out []string
	var walk func(e Expr)
	walk = func(e Expr) {
		if x, ok := e.(object); ok && x.typeName == "JSONPatch" {
			if op, base, rel, _, ok := readOp(x); ok && op == "add" && strings.HasSuffix(rel, "/-") {
				if base != "" {
					// A list inside list elements (".../containers/" + string(i) + "/env/-"):
					// named by the static beginning and end of its path, so that appends to
					// that list in any element count as appends to one list.
					rel = staticPrefix(x.vals[1]) + "*" + rel
				}
				out = append(out, rel)
			}
			return
		}
		eachChild(e, func(k Expr) bool { walk(k); return true })
	}
	walk(e)
	return out
}

// apart: do the appended lists ap and bp have none in common?
func apart(ap, bp []string) bool {
	for _, p := range bp {
		for _, a := range ap {
			if p == a {
				return false
			}
		}
	}
	return true
}

// disjoint: are the operations of a and b on nodes neither of which contains the other (so that
// they commute)? False when a path cannot be read.
func disjoint(a, b Expr) bool {
	pa, okA := opPaths(a, nil)
	pb, okB := opPaths(b, nil)
	if !okA || !okB {
		return false
	}
	for _, x := range pa {
		for _, y := range pb {
			sameBase := x.readable && y.readable && x.base == y.base && !strings.HasPrefix(x.rel, y.rel) && !strings.HasPrefix(y.rel, x.rel)
			// Paths whose static beginnings already differ (neither a prefix of the other) are in
			// different subtrees, whatever the indices after them.
			apart := !strings.HasPrefix(x.static, y.static) && !strings.HasPrefix(y.static, x.static)
			if !sameBase && !apart && !tokensApart(x.tokens, y.tokens) {
				return false
			}
		}
	}
	return true
}

// opPath is an operation's path: base + rel when it ends in a static string (readable), and its
// static beginning (the whole path when it is static).
type opPath struct {
	base, rel string
	readable  bool
	static    string
	tokens    []int32 // see pathTokens
}

// indexToken stands for a run-time list index in pathTokens.
const indexToken = -1

// pathTokens is a path made of static strings and run-time list indices (string(i), each a whole
// segment) as its static bytes with indexToken for each index; nil for any other path.
func pathTokens(e Expr) []int32 {
	var out []int32
	for _, p := range flatten(e, "+") {
		if s, ok := strValue(p); ok {
			for i := 0; i < len(s); i++ {
				out = append(out, int32(s[i]))
			}
			continue
		}
		if c, ok := p.(call); !ok || c.target != nil || c.fn != "string" || len(c.args) != 1 || len(out) == 0 || out[len(out)-1] != '/' {
			return nil
		}
		out = append(out, indexToken)
	}
	for i, t := range out {
		if t == indexToken && i+1 < len(out) && out[i+1] != '/' {
			return nil
		}
	}
	return out
}

// tokensApart: do the paths a and b (pathTokens) name nodes neither of which contains the
// other? They part where their static bytes differ. Where both have an index, the indices name
// the same element or different ones: either way the nodes below are apart if the rest of the
// paths part. An index against static bytes, or one path a prefix of the other, may be the same
// node.
func tokensApart(a, b []int32) bool {
	if a == nil || b == nil {
		return false
	}
	for k := 0; k < len(a) && k < len(b); k++ {
		if a[k] == b[k] {
			continue
		}
		return a[k] != indexToken && b[k] != indexToken
	}
	return false
}

// opPaths lists the paths of the JSONPatch operations in e; false if one is not a JSONPatch
// literal with a path.
func opPaths(e Expr, acc []opPath) ([]opPath, bool) {
	if x, ok := e.(object); ok && x.typeName == "JSONPatch" {
		if len(x.fields) < 2 || x.fields[1] != "path" {
			return nil, false
		}
		_, base, rel, _, readable := readOp(x)
		return append(acc, opPath{base: base, rel: rel, readable: readable, static: staticPrefix(x.vals[1]), tokens: pathTokens(x.vals[1])}), true
	}
	ok := eachChild(e, func(k Expr) bool {
		var ok bool
		acc, ok = opPaths(k, acc)
		return ok
	})
	if !ok {
		return nil, false
	}
	return acc, true
}

// staticPrefix is the static beginning of a path expression (a concatenation of string
// literals and run-time pieces).
func staticPrefix(e Expr) string {
	var s string
	for _, t := range flatten(e, "+") {
		v, ok := strValue(t)
		if !ok {
			break
		}
		s += v
	}
	return s
}

// eachChild calls fn on each operand of e (nil ones left out) until fn returns false, and
// says whether it went through all of them. It allocates nothing: the compactor walks every
// term many times.
func eachChild(e Expr, fn func(Expr) bool) bool {
	visit := func(xs ...Expr) bool {
		for _, k := range xs {
			if k != nil && !fn(k) {
				return false
			}
		}
		return true
	}
	switch x := e.(type) {
	case object:
		return visit(x.vals...)
	case cond:
		return visit(x.c, x.t, x.f)
	case binary:
		return visit(x.l, x.r)
	case unary:
		return visit(x.x)
	case listExpr:
		return visit(x.elems...)
	case optList:
		return visit(x.elems...)
	case mapExpr:
		return visit(x.vals...)
	case optMap:
		return visit(x.vals...)
	case call:
		return visit(x.target) && visit(x.args...)
	case index:
		return visit(x.operand, x.key)
	case field:
		return visit(x.operand)
	}
	return true
}

// hasPre: does e hold a shared creation?
func hasPre(e Expr) bool {
	if x, ok := e.(object); ok && x.pre {
		return true
	}
	return !eachChild(e, func(k Expr) bool { return !hasPre(k) })
}

func compactTerm(t Expr) Expr {
	switch x := t.(type) {
	case cond:
		tt, ff := Compact(x.t), Compact(x.f)
		if Len(tt) == Len(ff) && String(tt) == String(ff) { // (Len first: it allocates nothing)
			return tt // both branches give the same list; c only chose between them
		}
		return cond{x.c, tt, ff}
	case call:
		if x.fn != "flatten" || len(x.args) != 0 || x.target == nil {
			return t
		}
		tl, ok := x.target.(call)
		if !ok || tl.fn != "transformList" || len(tl.args) != 3 || tl.target == nil {
			return t
		}
		body := Compact(tl.args[2])
		if c, op, ok := singleOp(body); ok {
			// At most one operation per element: the loop keeps the elements c holds for and
			// maps each to op, with no list per element to flatten (10 less per element in
			// the cost model, and the flatten).
			if c == True {
				return Method(tl.target, "transformList", tl.args[0], tl.args[1], op)
			}
			return Method(tl.target, "transformList", tl.args[0], tl.args[1], c, op)
		}
		return Method(Method(tl.target, "transformList", tl.args[0], tl.args[1], body), "flatten")
	case binary:
		if x.op == "+" {
			return Compact(x)
		}
	}
	return t
}

// singleOp: is t one operation op where c holds and none elsewhere ([op], c ? [op] : [],
// c ? [] : [op], nested)?
func singleOp(t Expr) (c, op Expr, ok bool) {
	switch x := t.(type) {
	case listExpr:
		if len(x.elems) == 1 {
			if _, isObj := x.elems[0].(object); isObj {
				return True, x.elems[0], true
			}
		}
	case cond:
		switch {
		case isEmpty(x.f):
			if c, op, ok := singleOp(x.t); ok {
				return And(x.c, c), op, true
			}
		case isEmpty(x.t):
			if c, op, ok := singleOp(x.f); ok {
				return And(Not(x.c), c), op, true
			}
		}
	}
	return nil, nil, false
}

// distribute moves a plain list of operations into both branches of an earlier conditional
// term, c ? T : F, when a branch adds an object literal above every one of its paths:
// (c ? T : F) + L is c ? T + L : F + L, and there foldAdds can fold L into the literal (a
// container's securityContext created with some fields, and an unconditional write of another
// field of it: one operation instead of two where the node was missing). L only moves past
// terms its operations commute with.
func distribute(ts []Expr) []Expr {
	for i := 0; i < len(ts); i++ {
		c, ok := ts[i].(cond)
		if !ok {
			continue
		}
		for j := i + 1; j < len(ts); j++ {
			l, ok := ts[j].(listExpr)
			if !ok || len(l.elems) == 0 || hasPre(l) || !addsObjectAbove(c.t, l) && !addsObjectAbove(c.f, l) {
				continue
			}
			between := true
			for _, t := range ts[i+1 : j] {
				if !disjoint(t, l) {
					between = false
					break
				}
			}
			if !between {
				continue
			}
			c = cond{c.c, Bin("+", c.t, l), Bin("+", c.f, l)}
			ts[i] = c
			ts = append(ts[:j:j], ts[j+1:]...)
			j--
		}
	}
	return ts
}

// addsObjectAbove: does e (a list expression) hold a plain "add" of an object literal at a path
// above the path of every operation of l?
func addsObjectAbove(e Expr, l listExpr) bool {
	var adds []opPath
	var walk func(e Expr)
	walk = func(e Expr) {
		switch x := e.(type) {
		case binary:
			if x.op == "+" {
				walk(x.l)
				walk(x.r)
			}
		case listExpr:
			for _, el := range x.elems {
				if op, base, rel, v, ok := readOp(el); ok && op == "add" {
					if _, isMap := v.(mapExpr); isMap {
						adds = append(adds, opPath{base: base, rel: rel})
					}
				}
			}
		}
	}
	walk(e)
	for _, el := range l.elems {
		_, base, rel, _, ok := readOp(el)
		if !ok {
			return false
		}
		below := false
		for _, a := range adds {
			if a.base == base && strings.HasPrefix(rel, a.rel+"/") {
				below = true
			}
		}
		if !below {
			return false
		}
	}
	return true
}

// atMostOne: does t give at most one operation, whatever the object ([], [p], or conditions
// choosing between such)?
func atMostOne(t Expr) bool {
	switch x := t.(type) {
	case listExpr:
		return len(x.elems) <= 1
	case cond:
		return atMostOne(x.t) && atMostOne(x.f)
	}
	return false
}

// asOptional is t (at most one operation) as an optional operation.
func asOptional(t Expr) Expr {
	switch x := t.(type) {
	case listExpr:
		if len(x.elems) == 0 {
			return Method(Ident("optional"), "none")
		}
		return Method(Ident("optional"), "of", x.elems[0])
	case cond:
		return Cond(x.c, asOptional(x.t), asOptional(x.f))
	}
	panic("asOptional of more than one operation")
}

// listLike: can t be an element, or elements, of a list literal (a list literal, or at most one
// operation chosen by conditions)?
func listLike(t Expr) bool {
	switch t.(type) {
	case listExpr, optList:
		return true
	}
	return atMostOne(t)
}

// optionalRuns turns each run of two or more list-like terms into one list literal, and folds
// the operations of each literal that add into a node an earlier one adds (foldAdds).
func optionalRuns(ts []Expr) []Expr {
	var out []Expr
	for i := 0; i < len(ts); {
		j := i
		for j < len(ts) && listLike(ts[j]) {
			j++
		}
		if j-i < 2 {
			if l, ok := ts[i].(listExpr); ok {
				ts[i] = foldAdds(optList{elems: l.elems, opt: make([]bool, len(l.elems))}).plain()
			}
			out = append(out, ts[i])
			i++
			continue
		}
		var l optList
		for _, t := range ts[i:j] {
			switch x := t.(type) {
			case listExpr:
				l.elems = append(l.elems, x.elems...)
				l.opt = append(l.opt, make([]bool, len(x.elems))...)
			case optList:
				l.elems, l.opt = append(l.elems, x.elems...), append(l.opt, x.opt...)
			default:
				l.elems, l.opt = append(l.elems, asOptional(t)), append(l.opt, true)
			}
		}
		out = append(out, foldAdds(l).plain())
		i = j
	}
	return out
}

// plain is l as a plain list literal when no element is optional.
func (l optList) plain() Expr {
	for _, o := range l.opt {
		if o {
			return l
		}
	}
	return List(l.elems...)
}

// foldAdds folds each plain "add" operation whose path lies below the path of an earlier plain
// "add" of an object literal into that literal, when nothing in between may touch that node:
// [add /r {}, add /r/a {}, add /r/a/b v] is [add /r {"a": {"b": v}}]. JSON Patch applies them in
// order, so the result is the same node; the API server charges one operation instead of three.
func foldAdds(l optList) optList {
	type op struct {
		op        string
		base, rel string // the path: a dynamic prefix (printed) and the static rest
		value     Expr
	}
	// The elements may be shared with other trees (expressions are values built once and used in
	// several places): never change l's own slice.
	l.elems = append([]Expr(nil), l.elems...)
	ops := make([]*op, len(l.elems))
	keep := make([]bool, len(l.elems))
	for i, e := range l.elems {
		keep[i] = true
		if !l.opt[i] {
			if o, base, rel, value, ok := readOp(e); ok {
				ops[i] = &op{o, base, rel, value}
			}
		}
	}
	changed := false
	for k := range l.elems {
		ak := ops[k]
		if ak == nil || ak.op != "add" {
			continue
		}
		for j := k - 1; j >= 0; j-- {
			if !keep[j] {
				continue
			}
			aj := ops[j]
			if aj == nil || aj.base != ak.base {
				break // an optional, computed or differently based operation: keep the order
			}
			if !strings.HasPrefix(ak.rel, aj.rel) && !strings.HasPrefix(aj.rel, ak.rel) {
				continue // disjoint nodes
			}
			m, isMap := aj.value.(mapExpr)
			if aj.op == "add" && isMap && strings.HasPrefix(ak.rel, aj.rel+"/") {
				if nv, ok := setIn(m, strings.Split(ak.rel[len(aj.rel)+1:], "/"), ak.value); ok {
					aj.value = nv
					l.elems[j] = withValue(l.elems[j], nv)
					keep[k] = false
					changed = true
				}
			}
			break
		}
	}
	if !changed {
		return l
	}
	var out optList
	for i := range l.elems {
		if keep[i] {
			out.elems, out.opt = append(out.elems, l.elems[i]), append(out.opt, l.opt[i])
		}
	}
	return out
}

// readOp reads a JSONPatch{op, path, value} literal whose op is a string and whose path ends in a
// static string: path = base + rel.
func readOp(e Expr) (op, base, rel string, value Expr, ok bool) {
	o, isObj := e.(object)
	if !isObj || o.typeName != "JSONPatch" || len(o.fields) != 3 || o.fields[0] != "op" || o.fields[1] != "path" || o.fields[2] != "value" {
		return "", "", "", nil, false
	}
	op, ok = strValue(o.vals[0])
	if !ok {
		return "", "", "", nil, false
	}
	switch p := o.vals[1].(type) {
	case binary:
		if p.op != "+" {
			return "", "", "", nil, false
		}
		rel, ok = strValue(p.r)
		base = String(p.l)
	default:
		rel, ok = strValue(p)
	}
	return op, base, rel, o.vals[2], ok
}

// setIn sets the member at the JSON pointer tokens below m to v (creating nothing: every node
// but the last must be an object literal there already), with every value of a changed literal
// as dyn() (map literals must have one value type).
func setIn(m mapExpr, tokens []string, v Expr) (mapExpr, bool) {
	key := strings.ReplaceAll(strings.ReplaceAll(tokens[0], "~1", "/"), "~0", "~")
	if tokens[0] == "-" {
		return m, false
	}
	idx := -1
	for i, k := range m.keys {
		s, ok := strValue(k)
		if !ok {
			return m, false // a computed key might be this one
		}
		if s == key {
			idx = i
		}
	}
	if len(tokens) > 1 {
		if idx < 0 {
			return m, false
		}
		child, ok := undyn(m.vals[idx]).(mapExpr)
		if !ok {
			return m, false
		}
		nc, ok := setIn(child, tokens[1:], v)
		if !ok {
			return m, false
		}
		v = nc
	}
	keys := append([]Expr(nil), m.keys...)
	vals := append([]Expr(nil), m.vals...)
	if idx < 0 {
		keys, vals = append(keys, Str(key)), append(vals, v)
	} else {
		vals[idx] = v
	}
	for i := range vals {
		vals[i] = Call("dyn", undyn(vals[i]))
	}
	return mapExpr{keys, vals}, true
}

func undyn(e Expr) Expr {
	if c, ok := e.(call); ok && c.target == nil && c.fn == "dyn" && len(c.args) == 1 {
		return c.args[0]
	}
	return e
}

// withValue is the JSONPatch literal e with another value.
func withValue(e Expr, v Expr) Expr {
	o := e.(object)
	vals := append([]Expr(nil), o.vals...)
	vals[2] = v
	return object{typeName: o.typeName, fields: o.fields, vals: vals, pre: o.pre}
}

// join is the concatenation of ts ([] when there are none).
func join(ts []Expr) Expr {
	if len(ts) == 0 {
		return emptyList
	}
	e := ts[0]
	for _, t := range ts[1:] {
		e = Bin("+", e, t)
	}
	return e
}
