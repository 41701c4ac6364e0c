package cel

import (
	"fmt"
	"strings"
)

// KeyLists gives the lists of the object at fixed paths whose elements one expression looks up
// by key several times (a keyed location such as spec.containers[name: foo], tested for each
// mutator that writes there) a policy variable: the key of every element, in order,
//
//	object["spec"]["containers"].map(e, "name" in e ? e["name"] : null)
//
// and rewrites each lookup to use it:
//
//	L.exists(x, "k" in x && x["k"] == V)                 →  V in variables.keys_L_k
//	L.transformList(i, x, "k" in x && x["k"] == V, i)[0]  →  variables.keys_L_k.indexOf(V)
//
// The API server evaluates a policy variable at most once per expression (lazily, on first use,
// and again for the next mutation, which sees the object the one before left), so the elements
// are read once instead of once per lookup: in the cost model each lookup then costs about the
// size of the list instead of about five per element.
//
// The two are equal for every list the lookups can see: V is a string literal, an element
// without the key (or not a string under it) never equals it, and indexOf gives the first equal
// index, as the transformList did. Only lists at fixed paths are hoisted (the object, then
// string keys): a lookup in a list inside an element depends on the comprehension's variable.
// The variable is referenced only where a lookup was, so it is evaluated only where the lookup
// was, and the list exists there.
type KeyLists struct {
	// Min is the number of lookups of one list in one expression from which the list gets a
	// variable (below it, the lookups are cheaper than listing the keys).
	Min int

	taken  map[string]bool
	byList map[string]int // list and key → index in vars
	vars   []keyList
}

type keyList struct {
	name string
	list Expr
	key  string
}

// NewKeyLists returns an empty KeyLists whose variables avoid the names taken.
func NewKeyLists(min int, taken []string) *KeyLists {
	k := &KeyLists{Min: min, taken: map[string]bool{}, byList: map[string]int{}}
	for _, n := range taken {
		k.taken[n] = true
	}
	return k
}

// keyLookup matches a lookup of the element with key == value in a list at a fixed path:
// list.exists(x, "k" in x && x["k"] == V) (index false) or
// list.transformList(i, x, "k" in x && x["k"] == V, i)[0] (index true).
func keyLookup(e Expr) (list Expr, key string, value Expr, isIndex bool, ok bool) {
	c, isCall := e.(call)
	if ix, isIx := e.(index); isIx && !ix.opt && isLit(ix.key, "0") {
		c, isCall = ix.operand.(call)
		isIndex = true
		if !isCall || c.fn != "transformList" || len(c.args) != 4 {
			return nil, "", nil, false, false
		}
		iv, ok1 := c.args[0].(ident)
		res, ok2 := c.args[3].(ident)
		if !ok1 || !ok2 || iv.name != res.name {
			return nil, "", nil, false, false
		}
		c.args = c.args[1:3]
	} else if !isCall || c.fn != "exists" || len(c.args) != 2 {
		return nil, "", nil, false, false
	}
	if c.target == nil || !fixedPath(c.target) {
		return nil, "", nil, false, false
	}
	x, ok := c.args[0].(ident)
	if !ok {
		return nil, "", nil, false, false
	}
	and, ok := c.args[1].(binary)
	if !ok || and.op != "&&" {
		return nil, "", nil, false, false
	}
	in, ok1 := and.l.(binary)
	eq, ok2 := and.r.(binary)
	if !ok1 || !ok2 || in.op != "in" || eq.op != "==" {
		return nil, "", nil, false, false
	}
	k, ok := strValue(in.l)
	if !ok || in.r != Expr(x) {
		return nil, "", nil, false, false
	}
	get, ok := eq.l.(index)
	if !ok || get.opt || get.operand != Expr(x) {
		return nil, "", nil, false, false
	}
	if k2, ok := strValue(get.key); !ok || k2 != k {
		return nil, "", nil, false, false
	}
	if _, ok := strValue(eq.r); !ok {
		return nil, "", nil, false, false
	}
	return c.target, k, eq.r, isIndex, true
}

// fixedPath: is e object, then string keys?
func fixedPath(e Expr) bool {
	for {
		switch x := e.(type) {
		case ident:
			return x.name == "object"
		case index:
			if _, ok := strValue(x.key); !ok || x.opt {
				return false
			}
			e = x.operand
		default:
			return false
		}
	}
}

func listKey(list Expr, key string) string { return String(list) + "\x00" + key }

// Hoist rewrites the lookups in e of the lists looked up at least Min times, adding their
// variables.
func (k *KeyLists) Hoist(e Expr) Expr {
	count := map[string]int{}
	var scan func(Expr) bool
	scan = func(x Expr) bool {
		if l, key, _, _, ok := keyLookup(x); ok {
			count[listKey(l, key)]++
		}
		return eachChild(x, scan)
	}
	scan(e)
	hoist := false
	for _, n := range count {
		hoist = hoist || n >= k.Min
	}
	if !hoist {
		return e
	}
	return transform(e, func(x Expr) Expr {
		if c, ok := x.(cond); ok && isLit(c.f, "-1") && isIndexOf(c.t) && String(c.c) == String(Bin("in", c.t.(call).args[0], c.t.(call).target)) {
			// (V in keys) ? keys.indexOf(V) : -1 is keys.indexOf(V).
			return c.t
		}
		l, key, v, isIndex, ok := keyLookup(x)
		if !ok || count[listKey(l, key)] < k.Min {
			return x
		}
		ref := VarRef(k.variable(l, key))
		if isIndex {
			return Method(ref, "indexOf", v)
		}
		return Bin("in", v, ref)
	})
}

// isIndexOf: is e L.indexOf(V)?
func isIndexOf(e Expr) bool {
	c, ok := e.(call)
	return ok && c.fn == "indexOf" && c.target != nil && len(c.args) == 1
}

// variable is the name of the variable listing key in list, added if new.
func (k *KeyLists) variable(list Expr, key string) string {
	id := listKey(list, key)
	if i, ok := k.byList[id]; ok {
		return k.vars[i].name
	}
	var b strings.Builder
	b.WriteString("keys")
	for _, part := range append(pathKeys(list), key) {
		b.WriteByte('_')
		for _, r := range part {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
	}
	base := b.String()
	if len(base) > maxVariableName {
		base = base[:maxVariableName]
	}
	name := base
	for i := 2; k.taken[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	k.taken[name] = true
	k.byList[id] = len(k.vars)
	k.vars = append(k.vars, keyList{name: name, list: list, key: key})
	return name
}

// maxVariableName bounds the length of a variable's name derived from a path (the API server
// sets no limit; the names stay readable).
const maxVariableName = 60

// pathKeys is the keys of a fixed path, from the object down.
func pathKeys(e Expr) []string {
	var keys []string
	for {
		x, ok := e.(index)
		if !ok {
			break
		}
		s, _ := strValue(x.key)
		keys = append([]string{s}, keys...)
		e = x.operand
	}
	return keys
}

// Variables is the variables added so far, in order, as expressions.
func (k *KeyLists) Variables() []NamedExpr {
	out := make([]NamedExpr, len(k.vars))
	for i, v := range k.vars {
		e, key := Ident("e"), Str(v.key)
		out[i] = NamedExpr{Name: v.name, Expr: Method(v.list, "map", e, Cond(Bin("in", key, e), Index(e, key), Null()))}
	}
	return out
}

// NamedExpr is a policy variable as a tree.
type NamedExpr struct {
	Name string
	Expr Expr
}

// transform rebuilds e bottom up, replacing each node by fn of the node with its operands
// already transformed.
func transform(e Expr, fn func(Expr) Expr) Expr {
	return fn(withOperands(e, func(x Expr) Expr { return transform(x, fn) }))
}
