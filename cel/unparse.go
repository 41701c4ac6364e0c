package cel

import (
	"fmt"
	"strconv"
	"strings"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// binaryOps maps this package's operators to cel-go's function names.
var binaryOps = map[string]string{
	"==": operators.Equals, "!=": operators.NotEquals, "<": operators.Less, "<=": operators.LessEquals,
	">": operators.Greater, ">=": operators.GreaterEquals, "+": operators.Add, "-": operators.Subtract,
	"*": operators.Multiply, "/": operators.Divide, "%": operators.Modulo,
	"&&": operators.LogicalAnd, "||": operators.LogicalOr, "in": operators.In,
}

// astBuilder builds the cel-go syntax tree that parsing String(e) gives, a macro (has, all,
// exists, map, filter, transformList, ...) as the node the parser expands it to, with the call
// recorded in the source info, which is how the unparser prints a macro. TestPrintMatchesParser
// and SelfCheck check that Print gives exactly the text of parsing and unparsing.
type astBuilder struct {
	fac    ast.ExprFactory
	info   *ast.SourceInfo
	macros []celgo.Macro
	id     int64
}

// isMacro says whether the environment's parser expands the call as a macro: one of its
// macros has the call's name, argument count (or takes any) and style (on a target or not).
// (A macro may still decline an unusual call, has() of something not a field say; this package
// never writes those, and SelfCheck compares every printed expression with the parser's.)
func (b *astBuilder) isMacro(c call) bool {
	for _, m := range b.macros {
		if m.Function() == c.fn && m.IsReceiverStyle() == (c.target != nil) && (strings.Contains(m.MacroKey(), ":*:") || m.ArgCount() == len(c.args)) {
			return true
		}
	}
	return false
}

func (b *astBuilder) next() int64 { b.id++; return b.id }

func (b *astBuilder) build(e Expr) (ast.Expr, error) {
	switch x := e.(type) {
	case lit:
		v, err := literalValue(x.text)
		if err != nil {
			return nil, err
		}
		return b.fac.NewLiteral(b.next(), v), nil
	case strLit:
		return b.fac.NewLiteral(b.next(), types.String(x.s)), nil
	case ident:
		return b.fac.NewIdent(b.next(), x.name), nil
	case index:
		o, err := b.build(x.operand)
		if err != nil {
			return nil, err
		}
		k, err := b.build(x.key)
		if err != nil {
			return nil, err
		}
		if x.opt {
			return b.fac.NewCall(b.next(), operators.OptIndex, o, k), nil
		}
		return b.fac.NewCall(b.next(), operators.Index, o, k), nil
	case field:
		o, err := b.build(x.operand)
		if err != nil {
			return nil, err
		}
		return b.fac.NewSelect(b.next(), o, x.name), nil
	case call:
		args, err := b.all(x.args)
		if err != nil {
			return nil, err
		}
		var c ast.Expr
		if x.target == nil {
			c = b.fac.NewCall(b.next(), x.fn, args...)
		} else {
			t, err := b.build(x.target)
			if err != nil {
				return nil, err
			}
			c = b.fac.NewMemberCall(b.next(), x.fn, t, args...)
		}
		if !b.isMacro(x) {
			return c, nil
		}
		// The parser expands a macro into another node (a presence test, a comprehension) and
		// records the call, which the unparser prints instead; the kind of node matters to how it
		// parenthesises its neighbours.
		id := b.next()
		var node ast.Expr
		if x.fn == "has" {
			if args[0].Kind() != ast.SelectKind {
				return nil, fmt.Errorf("has() of a %v", args[0].Kind())
			}
			sel := args[0].AsSelect()
			node = b.fac.NewPresenceTest(id, sel.Operand(), sel.FieldName())
		} else {
			t := func() ast.Expr { return b.fac.NewLiteral(b.next(), types.True) }
			node = b.fac.NewComprehension(id, t(), "_", "__result__", t(), t(), t(), t())
		}
		b.info.SetMacroCall(id, c)
		return node, nil
	case binary:
		op, ok := binaryOps[x.op]
		if !ok {
			return nil, fmt.Errorf("unknown operator %q", x.op)
		}
		args, err := b.all([]Expr{x.l, x.r})
		if err != nil {
			return nil, err
		}
		return b.fac.NewCall(b.next(), op, args...), nil
	case unary:
		if x.op != "!" {
			return nil, fmt.Errorf("unknown operator %q", x.op)
		}
		a, err := b.build(x.x)
		if err != nil {
			return nil, err
		}
		return b.fac.NewCall(b.next(), operators.LogicalNot, a), nil
	case cond:
		args, err := b.all([]Expr{x.c, x.t, x.f})
		if err != nil {
			return nil, err
		}
		return b.fac.NewCall(b.next(), operators.Conditional, args...), nil
	case listExpr:
		elems, err := b.all(x.elems)
		if err != nil {
			return nil, err
		}
		return b.fac.NewList(b.next(), elems, nil), nil
	case optList:
		elems, err := b.all(x.elems)
		if err != nil {
			return nil, err
		}
		var opt []int32
		for i, o := range x.opt {
			if o {
				opt = append(opt, int32(i))
			}
		}
		return b.fac.NewList(b.next(), elems, opt), nil
	case mapExpr:
		return b.mapOf(x.keys, x.vals, nil)
	case optMap:
		return b.mapOf(x.keys, x.vals, x.opt)
	case object:
		fields := make([]ast.EntryExpr, len(x.fields))
		for i := range x.fields {
			id := b.next()
			v, err := b.build(x.vals[i])
			if err != nil {
				return nil, err
			}
			fields[i] = b.fac.NewStructField(id, x.fields[i], v, false)
		}
		return b.fac.NewStruct(b.next(), x.typeName, fields), nil
	}
	return nil, fmt.Errorf("cannot print %T", e)
}

func (b *astBuilder) all(xs []Expr) ([]ast.Expr, error) {
	out := make([]ast.Expr, len(xs))
	for i, x := range xs {
		a, err := b.build(x)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// literalValue reads back a literal this package wrote.
func literalValue(text string) (ref.Val, error) {
	switch text {
	case "true":
		return types.True, nil
	case "false":
		return types.False, nil
	case "null":
		return types.NullValue, nil
	}
	if text[0] == '"' {
		s, err := strconv.Unquote(text)
		if err != nil {
			return nil, err
		}
		return types.String(s), nil
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return types.Int(i), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, fmt.Errorf("unknown literal %s", text)
	}
	return types.Double(f), nil
}

// mapOf builds a map literal; entries whose opt is set have optional values.
func (b *astBuilder) mapOf(keys, vals []Expr, opt []bool) (ast.Expr, error) {
	entries := make([]ast.EntryExpr, len(keys))
	for i := range keys {
		id := b.next()
		k, err := b.build(keys[i])
		if err != nil {
			return nil, err
		}
		v, err := b.build(vals[i])
		if err != nil {
			return nil, err
		}
		entries[i] = b.fac.NewMapEntry(id, k, v, opt != nil && opt[i])
	}
	return b.fac.NewMap(b.next(), entries), nil
}
