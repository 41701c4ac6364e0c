package lower

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	jmespath "github.com/kyverno/go-jmespath"

	"github.com/mapc-dev/mapc/cel"
)

// A variable's JMESPath is parsed by github.com/kyverno/go-jmespath, the fork Kyverno v1.19.1
// evaluates variables with, and its syntax tree lowered to CEL with that fork's semantics:
//
//   - a field of an object that lacks it is "not found": an error a path passes on, which fails
//     the rule at the top of a variable, but which ||, &&, !, comparisons, pipes and function
//     arguments read as null;
//   - a field of anything but an object is null, and so is an index outside an array or of
//     anything but an array (never an error);
//   - false, null, "", [] and {} are false, everything else true (|| and && return operands).
//
// Every lowered expression is a value: its CEL evaluation fails exactly where Kyverno's
// evaluation of the variable fails (then Kyverno fails the rule), and otherwise gives the value
// Kyverno's gives. What cannot be lowered so is refused, by name.

// virtual names a part of Kyverno's JSON context that is not a value in CEL: the context itself,
// request, request.userInfo (a CEL message whose empty fields Kyverno's JSON omits), request.kind.
type virtual uint8

const (
	real virtual = iota
	vRoot
	vRequest
	vUserInfo
	vKind
	vConfigMap // a configMap context entry: {"data": ..., "metadata": ...}
	vNamespace // the request's Namespace object, from an apiCall context entry
	vNamespaceMeta
	vImages    // Kyverno's images variable
	vImageList // images.<list>; e is the list's name, a CEL string
)

// value is a JMESPath expression lowered.
type value struct {
	e cel.Expr // the value; fails where Kyverno fails (a missing field included)
	t types    // the types e can have

	// missing: Kyverno can find no value (a missing field, passed on by a path). e then fails;
	// soft is the value with that read as null (as Kyverno's operators read it), of types st.
	missing bool
	soft    cel.Expr
	st      types
	softErr error // why soft cannot be lowered (then soft is nil)

	// opt, when not nil, is soft as a CEL optional (none when missing): for path steps through
	// objects, which chain as opt[?"name"].
	opt cel.Expr

	sh     Shape    // what the schema says of the value, for the steps below it
	virt   virtual  // a part of the context that is not a CEL value (e, t unset)
	simple bool     // e is cheap to repeat (a name, a literal, or literal steps below one)
	path   bool     // e is object, oldObject or an element, or steps below one (dynamically typed in CEL)
	jnum   bool     // a number JMESPath made (a float64 in Kyverno); a number read from the object reaches Kyverno's functions as a float64 or an int64, depending on the rule
	ascii  bool     // a string known to hold only ASCII characters
	tame   tameness // what is known of a string's characters (see tameness)
	items  types    // for an array a function made, the types of its items (0: as the shape says)

	// lossy: a string that in Kyverno can hold bytes that are not UTF-8, which CEL holds as
	// U+FFFD each (serviceAccountNamespace; see serviceAccount). Go's JSON writes such a byte as
	// U+FFFD, and Go reads it as the character U+FFFD, so a patch, a string it is part of, its
	// truth and its comparison with a string without U+FFFD are exact; Kyverno's functions, which
	// work on its bytes, are not lowered on it.
	lossy bool

	// imageInfo: an entry of Kyverno's images variable (see images), whose fields are strings.
	imageInfo bool
}

// found is a value Kyverno always finds.
func found(e cel.Expr, t types, simple bool) value {
	return value{e: e, t: t, soft: e, st: t, simple: simple}
}

// lowerSoft lowers n on cur, a missing value read as null (see softValue).
func (c *lowering) lowerSoft(n jmespath.ASTNode, cur value) (value, error) {
	v, err := c.lower(n, cur)
	if err != nil {
		return value{}, err
	}
	return c.softValue(v)
}

// softValue is v with a missing field read as null, as a value of its own (never missing).
func (c *lowering) softValue(v value) (value, error) {
	if v.virt != real {
		return value{}, c.refuse("%s is not a value Kyverno's functions and operators can read here", c.virtName(v.virt))
	}
	if v.softErr != nil {
		return value{}, v.softErr
	}
	out := found(v.soft, v.st, v.simple && !v.missing)
	out.sh, out.jnum, out.ascii, out.tame, out.items, out.lossy = v.sh, v.jnum, v.ascii, v.tame, v.items, v.lossy
	return out, nil
}

// lowering lowers one variable.
type lowering struct {
	src string // the variable's text, for messages
	sc  Scope
	n   int // names bound so far
	// inner are the variables written inside this one's text, whose values Kyverno splices
	// into it: the text names the k-th as the field "\x00k" (spliced inside quotes) or
	// "\x01k" (spliced bare), or holds it as the raw string '\x02k' (see splicedText).
	inner []value

	// unorderedNext: the next call lowered is keys or values whose result is read where the
	// order of its items changes nothing: the whole variable, keys(path) or path.keys(@), read
	// by a set operator (Scope.orderFree), or the first argument of sort, length or contains
	// (orderFreeArgument).
	unorderedNext bool
	// free: the node lower is called for is read where the order of its items changes
	// nothing: the whole variable read by a set operator (Scope.orderFree), or an operand of ||
	// there. Each call of lower takes it for its node alone.
	free bool
}

// isKeysCall: is n keys(p) or p.keys(@), p a path of fields and indices (whose lowering calls
// no function before keys)?
func isKeysCall(n jmespath.ASTNode) bool { return isCallOnPath(n, "keys") }

// isCallOnPath: is n fn(p), fn(@) or p.fn(@), p a path of fields and indices (whose lowering
// calls no function before fn)?
func isCallOnPath(n jmespath.ASTNode, fn string) bool {
	call := func(n jmespath.ASTNode) bool {
		return n.NodeType == jmespath.ASTFunctionExpression && n.Value == fn && len(n.Children) == 1
	}
	if call(n) {
		at := n.Children[0].NodeType
		return isPathStep(n.Children[0]) || at == jmespath.ASTCurrentNode || at == jmespath.ASTIdentity
	}
	if n.NodeType == jmespath.ASTSubexpression && call(n.Children[1]) {
		at := n.Children[1].Children[0].NodeType
		return isPathStep(n.Children[0]) && (at == jmespath.ASTCurrentNode || at == jmespath.ASTIdentity)
	}
	return false
}

func (c *lowering) refuse(format string, args ...any) error {
	return fmt.Errorf("the variable {{%s}}: %s", c.src, fmt.Sprintf(format, args...))
}

func (c *lowering) virtName(v virtual) string {
	switch v {
	case vRoot:
		return "the whole context (@)"
	case vRequest:
		return "request"
	case vUserInfo:
		return "request.userInfo"
	case vConfigMap:
		return "a configMap context entry"
	case vNamespace:
		return "the namespace's whole object (an apiCall context entry)"
	case vNamespaceMeta:
		return "the namespace's whole metadata (an apiCall context entry)"
	case vImages:
		return "images as a whole"
	case vImageList:
		return "a list of images as a whole"
	}
	return "request.kind"
}

// fresh is a new identifier, for a comprehension's variable.
func (c *lowering) fresh() cel.Expr {
	c.n++
	return cel.Ident(fmt.Sprintf("jp%d", c.n))
}

// bind gives body the value of x, evaluated once: x itself when it is cheap to repeat, else a
// name bound to it.
func (c *lowering) bind(x cel.Expr, simple bool, body func(cel.Expr) cel.Expr) cel.Expr {
	if simple {
		return body(x)
	}
	c.n++
	name := fmt.Sprintf("jp%d", c.n)
	return cel.Let(name, x, body(cel.Ident(name)))
}

// variable lowers a variable's JMESPath (the text between {{ and }}, trimmed).
func variable(s string, sc Scope) (value, error) { return variableIn(s, sc, nil, s) }

// variableIn lowers a variable's JMESPath with the values of the variables written inside its
// text (see lowering.inner); src is the text as written.
func variableIn(s string, sc Scope, inner []value, src string) (value, error) {
	if src == "" {
		src = s
	}
	c := &lowering{src: src, sc: sc, inner: inner}
	if s == "@" {
		return value{}, c.refuse("{{@}} (Kyverno's name for the patched field's own value in the object) is not supported yet")
	}
	if strings.HasPrefix(s, "-") {
		return value{}, c.refuse("shallow substitution ({{- }}) is not supported yet")
	}
	n, err := jmespath.NewParser().Parse(s)
	if err != nil {
		return value{}, c.refuse("not JMESPath Kyverno can read (%v): Kyverno fails the rule", err)
	}
	c.unorderedNext = sc.orderFree && isKeysCall(n)
	c.free = sc.orderFree
	v, err := c.lower(n, value{virt: vRoot})
	if err != nil {
		return value{}, err
	}
	if v.virt != real {
		return value{}, c.refuse("%s is not supported as a value", c.virtName(v.virt))
	}
	return loaded(v, s, sc), nil
}

const supportedRoots = "paths below request.object, request.oldObject, request.userInfo, request.kind, and request.operation, request.namespace, request.name, serviceAccountName, serviceAccountNamespace, element, elementIndex, <entry>.data of the rule's configMap context entries, and the rule's variable context entries"

// lossyWhy is why a lossy value (see value.lossy) is refused.
const lossyWhy = "serviceAccountNamespace is Kyverno's cut of the user name at its 22nd byte, which can fall inside a character and leave bytes that are not UTF-8, which CEL's strings cannot hold: it is supported as a value, inside a string, with ||, && and !, and compared with a literal without U+FFFD, not in functions or compared with other values"

// lower lowers node n, evaluated on the current value cur (the context at the top).
func (c *lowering) lower(n jmespath.ASTNode, cur value) (value, error) {
	free := c.free
	c.free = false
	switch n.NodeType {
	case jmespath.ASTField:
		return c.field(cur, n.Value.(string))
	case jmespath.ASTIndex:
		if cur.virt != real {
			return value{}, c.refuse("an index of %s is not supported", c.virtName(cur.virt))
		}
		return c.index(cur, n.Value.(int)), nil
	case jmespath.ASTSubexpression, jmespath.ASTIndexExpression:
		l, err := c.lower(n.Children[0], cur)
		if err != nil {
			return value{}, err
		}
		if isPathStep(n.Children[1]) {
			// Steps of null are null: the right side on l's soft value is the soft value.
			return c.lower(n.Children[1], l)
		}
		// Kyverno stops at a missing l: the right side sees l's value.
		in := l
		if l.virt == real {
			in = found(l.e, l.t, l.simple)
			in.sh, in.jnum, in.ascii, in.tame, in.items, in.lossy = l.sh, l.jnum, l.ascii, l.tame, l.items, l.lossy
		}
		r, err := c.lower(n.Children[1], in)
		if err != nil {
			return value{}, err
		}
		if l.missing {
			r.missing, r.soft, r.opt = true, nil, nil
			r.softErr = c.refuse("%s after a field that may be missing is not supported where a missing value reads as null", nodeName(n.Children[1]))
			if n.Children[1].NodeType == jmespath.ASTProjection && l.softErr == nil {
				// A projection of a path gives null on null: on l read as null, it is r read so.
				ls, err := c.softValue(l)
				if err != nil {
					return value{}, err
				}
				rs, err := c.lower(n.Children[1], ls)
				if err != nil {
					return value{}, err
				}
				r.soft, r.st, r.softErr = rs.e, rs.t, nil
			}
		}
		return r, nil
	case jmespath.ASTLiteral:
		if v, ok, err := c.splicedText(n.Value); ok {
			return v, err
		}
		return literal(n.Value)
	case jmespath.ASTCurrentNode, jmespath.ASTIdentity:
		if cur.virt == vRoot {
			return value{}, c.refuse("@ outside a function's arguments in a pipe is not supported yet")
		}
		return cur, nil
	case jmespath.ASTOrExpression:
		// x || y is x or y: where the order of its items changes nothing, neither's does.
		c.free = free
		l, err := c.operand(n.Children[0], cur)
		if err != nil {
			return value{}, err
		}
		c.free = free
		r, err := c.operand(n.Children[1], cur)
		if err != nil {
			return value{}, err
		}
		var e cel.Expr
		if t, ok := literalTruth(l); ok {
			e = r.e
			if t {
				e = l.e
			}
		} else {
			e = c.bind(l.e, l.simple, func(x cel.Expr) cel.Expr {
				return cel.Cond(truthy(x, l.t), dyn(x), dyn(r.e))
			})
		}
		// l when it is true (so never null), else r.
		out := found(e, l.t&^tNull|r.t, false)
		out.ascii, out.tame, out.lossy = l.ascii && r.ascii, l.tame&r.tame, l.lossy || r.lossy
		if hasNoParts(r) {
			out.sh, out.items = l.sh, l.items // what is known of l's fields and items holds
		}
		return out, nil
	case jmespath.ASTAndExpression:
		l, err := c.operand(n.Children[0], cur)
		if err != nil {
			return value{}, err
		}
		r, err := c.lower(n.Children[1], cur)
		if err != nil {
			return value{}, err
		}
		if r.virt != real {
			return value{}, c.refuse("%s is not supported as a value", c.virtName(r.virt))
		}
		// r when l is true, else l (so never a number).
		lf := l.t &^ (tInt | tDouble)
		out := value{t: lf | r.t, st: lf | r.st, missing: r.missing, softErr: r.softErr, ascii: l.ascii && r.ascii, tame: l.tame & r.tame, lossy: l.lossy || r.lossy}
		and := func(r cel.Expr) cel.Expr {
			if t, ok := literalTruth(l); ok {
				if t {
					return r
				}
				return l.e
			}
			return c.bind(l.e, l.simple, func(x cel.Expr) cel.Expr { return cel.Cond(truthy(x, l.t), dyn(r), dyn(x)) })
		}
		out.e = and(r.e)
		if r.soft != nil {
			out.soft = and(r.soft)
		}
		if !out.missing {
			out.soft = out.e
		}
		return out, nil
	case jmespath.ASTNotExpression:
		x, err := c.operand(n.Children[0], cur)
		if err != nil {
			return value{}, err
		}
		e := c.bind(x.e, x.simple, func(x1 cel.Expr) cel.Expr {
			t := truthy(x1, x.t)
			if op, y, ok := cel.AsUnary(t); ok && op == "!" {
				return y
			}
			return cel.Not(t)
		})
		return found(e, tBool, false), nil
	case jmespath.ASTComparator:
		return c.compare(n, cur)
	case jmespath.ASTPipe:
		l, err := c.operand(n.Children[0], cur)
		if err != nil {
			return value{}, err
		}
		return c.lowerSoft(n.Children[1], l) // a missing value on the right of a pipe is null too
	case jmespath.ASTFunctionExpression:
		return c.call(n, cur)
	case jmespath.ASTProjection, jmespath.ASTFilterProjection:
		return c.projection(n, cur)
	case jmespath.ASTValueProjection:
		return c.valueProjection(n, cur, free)
	}
	return value{}, c.refuse("%s not supported yet", nodeName(n))
}

// projection lowers a list projection, l[*].r, a flattening one, l[].r, or a filter,
// l[?f].r, as Kyverno's go-jmespath evaluates them: l's value (a missing one read as null; a
// flattening or a filter swallows any error of l, which a path of fields and indices only has
// where a field is missing) that is not a list gives null; else (one level of lists in it
// spliced, for []; the items where f, a missing field read as null, is true in JMESPath's sense,
// for a filter) r on each item, a missing field null, and the items where r is null left out.
// Supported: l a path (fields and indices), r nothing, a path or such a projection again, f
// what variables support.
func (c *lowering) projection(n jmespath.ASTNode, cur value) (value, error) {
	left, flatten := n.Children[0], false
	if left.NodeType == jmespath.ASTFlatten {
		left, flatten = left.Children[0], true
	}
	right := n.Children[1]
	// The item itself (a[*][*], a projection of each item of a) is a path too.
	self := left.NodeType == jmespath.ASTIdentity || left.NodeType == jmespath.ASTCurrentNode
	if odd := notPath(left); odd != nil && !self {
		return value{}, c.refuse("%s not supported yet in what a projection ([*], []) goes over: only a path of fields and indices", nodeName(*odd))
	}
	identity := right.NodeType == jmespath.ASTIdentity || right.NodeType == jmespath.ASTCurrentNode
	// A projection on the right (a[*].b[*].c) runs on each item, as go-jmespath runs it: its
	// own call checks what it goes over and what follows it.
	nested := right.NodeType == jmespath.ASTProjection || right.NodeType == jmespath.ASTFilterProjection
	if odd := notPath(right); !identity && !nested && odd != nil {
		return value{}, c.refuse("%s not supported yet after a projection ([*], []): only a path of fields and indices, or another projection", nodeName(*odd))
	}
	l, err := c.operand(left, cur)
	if err != nil {
		return value{}, err
	}
	sh := l.sh.item()
	items := sh.types()
	if flatten && !items.only(tMap) {
		// Items that are lists are spliced (a list of objects is the same list).
		sh, items = Shape{}, tAny
	}
	c.n++
	item := fmt.Sprintf("jp%d", c.n)
	ev := found(cel.Ident(item), items, true)
	ev.sh, ev.path = sh, true
	var each cel.Expr = ev.e
	out := items
	var keep cel.Expr
	if n.NodeType == jmespath.ASTFilterProjection {
		f, err := c.operand(n.Children[2], ev)
		if err != nil {
			return value{}, err
		}
		keep = truthy(f.e, f.t)
	}
	if !identity {
		rv, err := c.lowerSoft(right, ev)
		if err != nil {
			return value{}, err
		}
		each, out = rv.e, rv.t
	}
	c.n++
	kept := fmt.Sprintf("jp%d", c.n)
	e := c.bind(l.e, l.simple, func(x cel.Expr) cel.Expr {
		list := dyn(x)
		if flatten {
			list = cel.Method(list, "flatten")
		}
		if keep != nil {
			list = cel.Method(list, "filter", cel.Ident(item), keep)
		}
		if !identity {
			list = cel.Method(list, "map", cel.Ident(item), each)
		}
		list = cel.Method(list, "filter", cel.Ident(kept), cel.Bin("!=", dyn(cel.Ident(kept)), cel.Null()))
		if l.t == tList {
			return list
		}
		return cel.Cond(isType(x, "list"), dyn(list), cel.Null())
	})
	t := tList
	if l.t != tList {
		t |= tNull
	}
	v := found(e, t, false)
	v.items = out &^ tNull
	return v, nil
}

// valueProjection lowers m.*.r, a projection of the values of the object m, where free says the
// order of the result's items changes nothing (Kyverno's follows Go's random map order).
// Supported: m the entries of one list of Kyverno's images (images.<list>, keyed by container
// name: the last container of a name with an image that is not blank), r a field of an entry. As
// go-jmespath evaluates it: m missing (no such list: no container there has an image, or the
// object has no containers) gives null; else r of each entry, those where it is missing (an
// empty registry, tag or digest) left out.
func (c *lowering) valueProjection(n jmespath.ASTNode, cur value, free bool) (value, error) {
	if !free {
		return value{}, c.refuse("a projection of an object's values (*) follows Go's random map order in Kyverno: supported only where the order changes nothing, as the whole key or value of AnyIn, AnyNotIn, AllIn, AllNotIn, In or NotIn (alone or with ||)")
	}
	if notPath(n.Children[0]) != nil {
		return value{}, c.refuse("%s not supported yet in what a projection of values (*) goes over: only images.<list>", nodeName(n.Children[0]))
	}
	l, err := c.lower(n.Children[0], cur)
	if err != nil {
		return value{}, err
	}
	if l.virt != vImageList {
		return value{}, c.refuse("a projection of an object's values (*) is supported only over images.<list> yet")
	}
	right := n.Children[1]
	if right.NodeType != jmespath.ASTField {
		return value{}, c.refuse("%s not supported yet after images.<list>.*: only a field of the image's entry (images.containers.*.registry)", nodeName(right))
	}
	if err := needs(c, "images", cel.Features{TwoVar: true}); err != nil {
		return value{}, err
	}
	if err := c.defaultRegistry("images"); err != nil {
		return value{}, err
	}
	list, _ := cel.StrValue(l.e)
	entries := cel.Index(cel.VarRef(ImagesVariable), cel.Str(list))
	i, en, j, other := c.fresh(), c.fresh(), c.fresh(), c.fresh()
	// Kyverno's map keeps the last container of each name.
	last := cel.Not(cel.Method(entries, "exists", j, other, cel.And(cel.Bin(">", j, i), cel.Bin("==", cel.Index(other, cel.Str("name")), cel.Index(en, cel.Str("name"))))))
	info := found(cel.Index(en, cel.Str("info")), tMap, false)
	info.imageInfo = true
	rv, err := c.lowerSoft(right, info)
	if err != nil {
		return value{}, err
	}
	each := cel.Method(entries, "transformList", i, en, last, rv.e)
	kept := c.fresh()
	e := c.bind(each, false, func(x cel.Expr) cel.Expr {
		// No entry: Kyverno's images has no such list, and the projection is null.
		return cel.Cond(cel.Bin("==", cel.Call("size", x), cel.Int(0)), cel.Null(),
			dyn(cel.Method(x, "filter", kept, cel.Bin("!=", dyn(kept), cel.Null()))))
	})
	v := found(e, tList|tNull, false)
	v.items = rv.t &^ tNull
	v.ascii = true
	return v, nil
}

// notPath is the first node of n that is not a field, an index or a path of them (nil: none).
func notPath(n jmespath.ASTNode) *jmespath.ASTNode {
	switch n.NodeType {
	case jmespath.ASTField, jmespath.ASTIndex:
		return nil
	case jmespath.ASTSubexpression, jmespath.ASTIndexExpression:
		if odd := notPath(n.Children[0]); odd != nil {
			return odd
		}
		return notPath(n.Children[1])
	}
	return &n
}

// hasNoParts: is v a literal without fields or items (a scalar, [] or {})?
func hasNoParts(v value) bool {
	if !cel.IsLiteral(v.e) {
		if l, ok := cel.AsList(v.e); ok {
			return len(l) == 0
		}
		return cel.String(v.e) == "{}"
	}
	return true
}

// operand lowers n as Kyverno's operators and function arguments read it: a missing value is null.
func (c *lowering) operand(n jmespath.ASTNode, cur value) (value, error) {
	v, err := c.lower(n, cur)
	if err != nil {
		return value{}, err
	}
	return c.softValue(v)
}

// isPathStep: is n a field, an index or a path of them (a step that gives null on null)?
func isPathStep(n jmespath.ASTNode) bool { return notPath(n) == nil }

// nodeName says what n is, for refusals.
func nodeName(n jmespath.ASTNode) string {
	switch n.NodeType {
	case jmespath.ASTProjection, jmespath.ASTValueProjection:
		return "projections ([*], *) are"
	case jmespath.ASTFilterProjection:
		return "filters ([?...]) are"
	case jmespath.ASTFlatten:
		return "flattening ([]) is"
	case jmespath.ASTSlice:
		return "slices ([a:b]) are"
	case jmespath.ASTMultiSelectList, jmespath.ASTMultiSelectHash:
		return "multi-select lists and hashes ([a, b], {k: a}) are"
	case jmespath.ASTExpRef:
		return "expression references (&expr) are"
	case jmespath.ASTFunctionExpression:
		return "a function call is"
	}
	return strings.TrimPrefix(n.NodeType.String(), "AST") + " is"
}

// field is cur.name.
func (c *lowering) field(cur value, name string) (value, error) {
	switch cur.virt {
	case vRoot:
		return c.root(name)
	case vRequest:
		switch name {
		case "object":
			v := found(object, tMap, true)
			v.sh, v.path = c.sc.Object, true
			return v, nil
		case "oldObject":
			// Null on CREATE, in CEL and in Kyverno's context.
			v := found(cel.Ident("oldObject"), tMap|tNull, true)
			v.sh, v.path = c.sc.Object, true
			return v, nil
		case "operation":
			v := found(cel.Field(request, name), tStr, true)
			v.ascii, v.tame = true, tameWord
			return v, nil
		case "namespace", "name":
			// Kyverno's context omits them when empty (a cluster-scoped object; a name yet to be
			// generated).
			v := found(cel.Field(request, name), tStr, true)
			v.missing, v.st = true, tStr|tNull
			v.soft = cel.Cond(cel.Bin("!=", v.e, cel.Str("")), dyn(v.e), cel.Null())
			return v, nil
		case "userInfo":
			return value{virt: vUserInfo, e: cel.Field(request, name)}, nil
		case "kind":
			return value{virt: vKind, e: cel.Field(request, name)}, nil
		}
		return value{}, c.refuse("request.%s is not supported yet; supported: %s", name, supportedRoots)
	case vUserInfo:
		var v value
		switch name {
		case "username", "uid":
			e := cel.Field(cur.e, name)
			v = found(e, tStr, true)
			v.soft = cel.Cond(cel.Bin("!=", e, cel.Str("")), dyn(e), cel.Null())
		case "groups":
			e := cel.Field(cur.e, name)
			v = found(e, tList, true)
			v.soft = cel.Cond(cel.Bin(">", cel.Call("size", e), cel.Int(0)), dyn(e), cel.Null())
		default:
			return value{}, c.refuse("request.userInfo.%s is not supported yet", name)
		}
		// Kyverno's context omits them when empty.
		v.missing, v.st = true, v.t|tNull
		return v, nil
	case vConfigMap:
		return c.configMapField(name)
	case vNamespace, vNamespaceMeta:
		return c.namespaceField(cur.virt, name)
	case vImages:
		if !slices.Contains(imageLists, name) {
			return value{}, c.refuse("Kyverno's images has only %s: it finds no %s and fails the rule", strings.Join(imageLists, ", "), name)
		}
		return value{virt: vImageList, e: cel.Str(name)}, nil
	case vImageList:
		list, _ := cel.StrValue(cur.e)
		key, err := c.fieldName(name, true)
		if err != nil {
			return value{}, err
		}
		return c.images(list, key)
	case vKind:
		switch name {
		case "group", "version", "kind":
			// The API server's names of its kinds: ASCII.
			v := found(cel.Field(cur.e, name), tStr, true)
			v.ascii, v.tame = true, tameWord
			return v, nil
		}
		return value{}, c.refuse("request.kind.%s is not supported", name)
	}
	if _, err := c.fieldName(name, false); err != nil {
		return value{}, err
	}
	if cur.imageInfo {
		return c.imageField(cur, name)
	}
	return c.step(cur, name), nil
}

// root is a name at the top of Kyverno's context.
func (c *lowering) root(name string) (value, error) {
	nth := func(prefix string) (int, bool) {
		if name == prefix {
			return -1, true
		}
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || !isDigits(rest) {
			return 0, false
		}
		n, err := strconv.Atoi(rest)
		return n, err == nil
	}
	switch name {
	case "request":
		return value{virt: vRequest}, nil
	case "serviceAccountName":
		return c.serviceAccount(1), nil
	case "serviceAccountNamespace":
		return c.serviceAccount(0), nil
	}
	if slices.Contains(c.sc.ConfigMaps, name) {
		return value{virt: vConfigMap}, nil
	}
	for _, cv := range c.sc.Vars {
		if cv.name == name {
			return c.entry(cv), nil
		}
	}
	if name == "images" {
		return value{virt: vImages}, nil
	}
	if n, ok := nth("elementIndex"); ok {
		if n < 0 {
			n = len(c.sc.Indexes) - 1
		}
		if n < 0 || n >= len(c.sc.Indexes) {
			return value{}, fmt.Errorf("the variable {{%s}} is outside a foreach loop of that depth", c.src)
		}
		return found(c.sc.Indexes[n], tInt, true), nil
	}
	if n, ok := nth("element"); ok {
		if n < 0 {
			n = len(c.sc.Elements) - 1
		}
		if n < 0 || n >= len(c.sc.Elements) {
			return value{}, fmt.Errorf("the variable {{%s}} is outside a foreach loop of that depth", c.src)
		}
		var sh Shape
		if n < len(c.sc.ElementShapes) {
			sh = c.sc.ElementShapes[n]
		}
		// Kyverno skips null elements.
		v := found(c.sc.Elements[n], sh.types()&^tNull, true)
		v.sh, v.path = sh, true
		return v, nil
	}
	if name == "" {
		// JMESPath's "" is the quoted name of a field named "" (often meant as an empty string,
		// which is ''): Kyverno's context has none, so it is a missing field, null to ||.
		return value{e: fail(`the context has no field named "" (JMESPath's "" is a field's name; an empty string is '')`), t: tNull,
			missing: true, soft: cel.Null(), st: tNull, simple: true}, nil
	}
	return value{}, c.refuse("%s is not supported yet; supported: %s", name, supportedRoots)
}

// configMapShape is what the schema says of a ConfigMap's data.
var configMapShape = ObjectShape(Kind{Version: "v1", Kind: "ConfigMap"}).field("data")

// configMapField is a field of a configMap context entry. Kyverno's loader
// (pkg/engine/context/loaders) makes the entry {"data": the ConfigMap's data, "metadata": its
// metadata}: data is null when the ConfigMap has none (Go's JSON of a nil map), while the API
// server's param object then has no data field. The policy's binding names the ConfigMap in its
// paramRef, with parameterNotFoundAction Deny: the mutations only run when it exists.
func (c *lowering) configMapField(name string) (value, error) {
	switch name {
	case "data":
		params := cel.Ident("params")
		v := found(cel.Cond(cel.Has(params, "data"), dyn(cel.Field(params, "data")), cel.Null()), tMap|tNull, false)
		v.sh, v.path = configMapShape, true
		return v, nil
	case "metadata":
		return value{}, c.refuse("the ConfigMap's metadata is not supported yet: only its data (%s.data.<key>)", strings.SplitN(c.src, ".", 2)[0])
	}
	return value{}, c.refuse("a configMap context entry has only data and metadata: Kyverno finds no %s and fails the rule", name)
}

// namespaceMetaShape is what the schema says of a Namespace's metadata.
var namespaceMetaShape = ObjectShape(Kind{Version: "v1", Kind: "Namespace"}).field("metadata")

// namespaceField is a field of the request's Namespace object as an apiCall context entry reads
// it from the API server, or of its metadata (at). A MutatingAdmissionPolicy reads the namespace
// as namespaceObject, which holds the object's metadata but its managed fields and owner
// references, and types its timestamps as CEL timestamps, and has no apiVersion or kind: its
// name, labels and annotations, and what is below them, are what both read alike.
func (c *lowering) namespaceField(at virtual, name string) (value, error) {
	const supported = "supported: metadata.name, metadata.labels, metadata.annotations and paths below them"
	if at == vNamespace {
		if name == "metadata" {
			return value{virt: vNamespaceMeta}, nil
		}
		return value{}, c.refuse("the namespace's %s is not supported: a MutatingAdmissionPolicy reads the namespace as namespaceObject, which differs from the object the API server serves there; %s", name, supported)
	}
	meta := cel.Field(cel.Ident("namespaceObject"), "metadata")
	switch name {
	case "name":
		v := found(cel.Field(meta, name), tStr, true)
		v.ascii, v.tame = true, tameWord // a DNS label
		return v, nil
	case "labels", "annotations":
		// Absent from an object without any: Kyverno's JMESPath finds no value there. The
		// API server's JSONPatch cannot write namespaceObject's own maps (its values of the
		// Namespace's schema convert to Go maps only): a copy (transformMap) can be written.
		if err := needs(c, "the namespace's metadata."+name, cel.Features{TwoVar: true}); err != nil {
			return value{}, err
		}
		e := cel.Method(cel.Field(meta, name), "transformMap", cel.Ident("k"), cel.Ident("v"), cel.Ident("v"))
		return value{e: dyn(e), t: tMap, missing: true, soft: cel.Cond(cel.Has(meta, name), dyn(e), cel.Null()), st: tMap | tNull,
			sh: namespaceMetaShape.field(name)}, nil
	}
	return value{}, c.refuse("the namespace's metadata.%s is not supported: a MutatingAdmissionPolicy reads the namespace as namespaceObject, which differs from the object the API server serves there; %s", name, supported)
}

// step is the field name of b (a value): b[name] where b is an object, null elsewhere; missing
// where b is an object without it.
func (c *lowering) step(b value, name string) value {
	key := cel.Str(name)
	sh := b.sh.field(name)
	t := sh.types()
	out := value{sh: sh, missing: b.missing || b.t&tMap != 0, tame: sh.tame()}
	base := b.e
	if !b.path {
		base = dyn(base) // a literal or a function's value: typed in CEL
	}
	switch {
	case b.t == tMap:
		out.e, out.t, out.simple, out.path = cel.Index(base, key), t, b.simple, b.path
	case b.t.only(tMap | tNull):
		out.e = c.bind(b.e, b.simple, func(x cel.Expr) cel.Expr {
			return cel.Cond(cel.Bin("==", dyn(x), cel.Null()), cel.Null(), dyn(cel.Index(dyn(x), key)))
		})
		out.t = t | tNull
	default:
		out.e = c.bind(b.e, b.simple, func(x cel.Expr) cel.Expr {
			return cel.Cond(isType(x, "map"), dyn(cel.Index(dyn(x), key)), cel.Null())
		})
		out.t = t | tNull
	}
	if b.t&tMap == 0 {
		out.t = tNull
	}
	if !out.missing {
		out.soft, out.st = out.e, out.t
		return out
	}
	out.st = out.t | tNull
	switch {
	case b.softErr != nil:
		out.softErr = b.softErr
	case b.t == tMap && (b.opt != nil || !b.missing):
		if b.opt != nil {
			base = b.opt
		}
		out.opt = cel.OptIndex(base, key)
		out.soft = dyn(cel.Method(out.opt, "orValue", cel.Null()))
	case b.st.only(tMap | tNull):
		out.soft = c.bind(b.soft, b.simple && !b.missing, func(x cel.Expr) cel.Expr {
			return cel.Cond(cel.Bin("==", dyn(x), cel.Null()), cel.Null(), dyn(cel.Method(cel.OptIndex(dyn(x), key), "orValue", cel.Null())))
		})
	default:
		out.soft = c.bind(b.soft, b.simple && !b.missing, func(x cel.Expr) cel.Expr {
			return cel.Cond(isType(x, "map"), dyn(cel.Method(cel.OptIndex(dyn(x), key), "orValue", cel.Null())), cel.Null())
		})
	}
	return out
}

// index is b[i]: the item of an array (counted from the end when i < 0), null outside it and
// for anything but an array.
func (c *lowering) index(b value, i int) value {
	sh := b.sh.item()
	t := sh.types() | tNull
	if b.items != 0 {
		t = b.items | tNull
	}
	at := func(x cel.Expr, t types) cel.Expr {
		if t != tList {
			x = dyn(x)
		}
		n := cel.Call("size", x)
		var e cel.Expr
		if i >= 0 {
			e = cel.Cond(cel.Bin(">", n, cel.Int(int64(i))), dyn(cel.Index(x, cel.Int(int64(i)))), cel.Null())
		} else {
			e = cel.Cond(cel.Bin(">=", n, cel.Int(int64(-i))), dyn(cel.Index(x, cel.Bin("-", n, cel.Int(int64(-i))))), cel.Null())
		}
		if t == tList {
			return e
		}
		return cel.Cond(isType(x, "list"), e, cel.Null())
	}
	out := value{sh: sh, t: t, missing: b.missing}
	out.e = c.bind(b.e, b.simple, func(x cel.Expr) cel.Expr { return at(x, b.t) })
	if !b.missing {
		out.soft, out.st = out.e, t
		return out
	}
	out.st = t
	if b.softErr != nil {
		out.softErr = b.softErr
		return out
	}
	out.soft = c.bind(b.soft, false, func(x cel.Expr) cel.Expr { return at(x, b.st) })
	return out
}

// literal is a JMESPath literal: a raw string ('...') or JSON (`...`).
func literal(v any) (value, error) {
	e, err := cel.Value(v)
	if err != nil {
		return value{}, err
	}
	out := found(e, typeOf(v), true)
	_, out.jnum = v.(float64)
	if str, ok := v.(string); ok {
		out.ascii, out.tame = isASCII(str), tameOf(str)
	}
	return out, nil
}

// typeOf is the type of a JSON value as JMESPath decoded it.
func typeOf(v any) types {
	switch x := v.(type) {
	case nil:
		return tNull
	case bool:
		return tBool
	case string:
		return tStr
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return tInt
		}
		return tDouble
	case []any:
		return tList
	case map[string]any:
		return tMap
	}
	return tAny
}

// operands lowers the two operands of a binary expression (||, ==, ...), each on cur.
func (c *lowering) operands(n jmespath.ASTNode, cur value) (l, r value, err error) {
	if l, err = c.operand(n.Children[0], cur); err != nil {
		return value{}, value{}, err
	}
	if r, err = c.operand(n.Children[1], cur); err != nil {
		return value{}, value{}, err
	}
	return l, r, nil
}

// compare is a comparison. Kyverno's == is Go's reflect.DeepEqual on the values, which tells an
// int64 from a float64 (the object's numbers reach it as either); so == and != are lowered when
// one side cannot be a number or hold one, and <, <=, >, >= (numbers only, as float64) not at all.
func (c *lowering) compare(n jmespath.ASTNode, cur value) (value, error) {
	op := fmt.Sprint(n.Value)
	if op != "tEQ" && op != "tNE" {
		return value{}, c.refuse("the comparisons <, <=, > and >= are not supported: Kyverno compares numbers only when both are float64, and the object's numbers reach it as int64 or float64 depending on the rule")
	}
	l, r, err := c.operands(n, cur)
	if err != nil {
		return value{}, err
	}
	scalar := tNull | tBool | tStr
	if !l.t.only(scalar) && !r.t.only(scalar) {
		return value{}, c.refuse("== and != are supported when one side is a string, a boolean or null: Kyverno compares numbers by their Go type (int64 or float64), which depends on the rule")
	}
	for _, x := range [][2]value{{l, r}, {r, l}} {
		if x[0].lossy && !literalWithout(x[1].e, '\ufffd') {
			return value{}, c.refuse("%s", lossyWhy)
		}
	}
	cmp := "=="
	if op == "tNE" {
		cmp = "!="
	}
	return found(cel.Bin(cmp, arg(l.e), arg(r.e)), tBool, false), nil
}

// literalWithout: is e a literal that is not a string holding r?
func literalWithout(e cel.Expr, r rune) bool {
	if !cel.IsLiteral(e) {
		return false
	}
	str, ok := cel.StrValue(e)
	return !ok || !strings.ContainsRune(str, r)
}

// literalTruth is the truth of a literal.
func literalTruth(v value) (truth, ok bool) {
	if !cel.IsLiteral(v.e) {
		if l, ok := cel.AsList(v.e); ok {
			return len(l) > 0, true
		}
		return false, false
	}
	switch s := cel.String(v.e); s {
	case "null", "false", `""`:
		return false, true
	}
	return true, true
}

// truthy is JMESPath's truth of x (a value of types t, cheap to repeat): false, null, "", [] and
// {} are false.
func truthy(x cel.Expr, t types) cel.Expr {
	switch t {
	case tBool:
		return x
	case tStr:
		return cel.Bin("!=", x, cel.Str(""))
	case tList, tMap:
		return cel.Bin(">", cel.Call("size", x), cel.Int(0))
	case tNull:
		return cel.Bin("!=", x, cel.Null())
	}
	d := dyn(x)
	var falsy []cel.Expr
	if t&tNull != 0 {
		falsy = append(falsy, cel.Bin("==", d, cel.Null()))
	}
	if t&tBool != 0 {
		falsy = append(falsy, cel.Bin("==", d, cel.False))
	}
	if t&tStr != 0 {
		falsy = append(falsy, cel.Bin("==", d, cel.Str("")))
	}
	if t&tList != 0 {
		falsy = append(falsy, cel.Bin("==", d, cel.List()))
	}
	if t&tMap != 0 {
		falsy = append(falsy, cel.Bin("==", d, cel.Map(nil, nil)))
	}
	if len(falsy) == 0 { // numbers are true; x is still evaluated
		return cel.Bin("!=", d, cel.Null())
	}
	return cel.Not(cel.Or(falsy...))
}

// isType is type(x) == name.
func isType(x cel.Expr, name string) cel.Expr {
	return cel.Bin("==", cel.Call("type", x), cel.Ident(name))
}

// dyn is dyn(x), for operands whose static CEL types may differ.
func dyn(x cel.Expr) cel.Expr {
	if _, fn, _, ok := cel.AsCall(x); ok && fn == "dyn" {
		return x
	}
	if x == cel.Null() {
		return x
	}
	return cel.Call("dyn", x)
}

// arg is x as a function's argument: literals as they are, other values dyn(x).
func arg(x cel.Expr) cel.Expr {
	if cel.IsLiteral(x) {
		return x
	}
	return dyn(x)
}

// typeNames lists the types of t, for messages.
func typeNames(t types) string {
	var out []string
	for _, x := range []struct {
		t    types
		name string
	}{{tNull, "null"}, {tBool, "a boolean"}, {tInt, "an integer"}, {tDouble, "a number with a fraction"}, {tStr, "a string"}, {tList, "an array"}, {tMap, "an object"}} {
		if t&x.t != 0 {
			out = append(out, x.name)
		}
	}
	return strings.Join(out, ", ")
}
