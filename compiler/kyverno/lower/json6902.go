package lower

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// JSON6902 lowers patchesJson6902 as Kyverno applies it (evanphx/json-patch v5 with
// EnsurePathExistsOnAdd and AllowMissingPathOnRemove): an add creates the missing objects above
// its path (a list when the next token is an index or "-"), a remove of a missing path does
// nothing, a replace of a missing path fails the rule. Operations run in order, each on the
// previous one's result; what an earlier operation wrote is known statically, and so are the
// maps every object of the kind apiVersion/kind has at admission (rootMaps).
func JSON6902(apiVersion, kind string, ops []kyverno.Op) (cel.Expr, error) {
	return json6902At(cel.Pointer{}, object, rootMaps(apiVersion, kind), ops)
}

// json6902At lowers the operations, their paths taken below base, where the value is cur;
// always are the maps cur always has (rootMaps for the object itself, nil elsewhere).
func json6902At(base cel.Pointer, cur cel.Expr, always map[string]bool, ops []kyverno.Op) (cel.Expr, error) {
	var parts []cel.Expr
	var done [][]string // paths written (added or replaced) by earlier operations
	var removed [][]string
	for n, op := range ops {
		field := fmt.Sprintf("[%d] (%s %s)", n, op.Op, op.Path)
		toks, err := pointer(op.Path)
		if err != nil {
			return nil, errorf(field, "%v", err)
		}
		for i, t := range toks {
			if strings.HasPrefix(t, "-") && t != "-" {
				if _, err := strconv.Atoi(t); err == nil {
					return nil, errorf(field, "negative list indices are not supported: Kyverno and the API server read them differently")
				}
			}
			if t == "-" && i != len(toks)-1 {
				return nil, errorf(field, "\"-\" can only end a path")
			}
			if isIndex(t) && i != len(toks)-1 && op.Op == "add" {
				return nil, errorf(field, "a list index inside a path is not supported yet (Kyverno pads missing items with nulls)")
			}
		}
		// Presence is tested on the object before the patch: a remove after an operation on an
		// overlapping path, or anything below a path removed before, would test the wrong object.
		stale := removedAbove(removed, toks)
		if op.Op == "remove" {
			for _, d := range append(append([][]string(nil), done...), removed...) {
				stale = stale || overlaps(d, toks)
			}
		}
		if stale {
			return nil, errorf(field, "follows an operation on an overlapping path, which is not supported yet; split them into rules")
		}
		switch op.Op {
		case "add":
			val, err := valueOf(op.Value)
			if err != nil {
				return nil, errorf(field, "%v", err)
			}
			known := func(depth int) bool { // an earlier add made toks[:depth+1]
				for _, d := range done {
					if len(d) > depth && overlaps(d[:depth+1], toks[:depth+1]) {
						return true
					}
				}
				return false
			}
			parts = append(parts, ensureAdd(cur, base, toks, 0, known, val, always))
			done = append(done, toks)
		case "replace":
			val, err := valueOf(op.Value)
			if err != nil {
				return nil, errorf(field, "%v", err)
			}
			if last := toks[len(toks)-1]; last == "-" {
				return nil, errorf(field, "replace at \"-\" fails in Kyverno: there is no such item")
			}
			parts = append(parts, cel.List(cel.PatchOp("replace", pointerOf(base, toks), val)))
			done = append(done, toks)
		case "remove":
			if toks[len(toks)-1] == "-" {
				continue // no such item: nothing to remove
			}
			parts = append(parts, cel.Guarded(exists(cur, toks, always), cel.List(cel.PatchOp("remove", pointerOf(base, toks), nil))))
			removed = append(removed, toks)
		}
	}
	return concat(parts), nil
}

// ensureAdd adds val at toks[d:] below cur (at p), creating what is missing above it; known(d)
// says an earlier operation made toks[:d+1].
func ensureAdd(cur cel.Expr, p cel.Pointer, toks []string, d int, known func(int) bool, val cel.Expr, always map[string]bool) cel.Expr {
	if d == len(toks)-1 {
		return cel.List(cel.PatchOp("add", p.Child(toks[d]), val))
	}
	t := toks[d]
	there := ensureAdd(cel.Index(cur, cel.Str(t)), p.Child(t), toks, d+1, known, val, always)
	if known(d) || always[pathKey(toks[:d+1])] {
		return there
	}
	whenMissing := cel.List(cel.PatchOp("add", p.Child(t), created(toks[d+1:], val)))
	return cel.CondList(present(cur, t), there, whenMissing)
}

// removedAbove: did an earlier operation remove a path above toks?
func removedAbove(removed [][]string, toks []string) bool {
	for _, r := range removed {
		if len(r) < len(toks) && overlaps(r, toks) {
			return true
		}
	}
	return false
}

// created is the value that makes the path toks with val at its end: objects, and a list of
// val when the last token is an index (0) or "-".
func created(toks []string, val cel.Expr) cel.Expr {
	if len(toks) == 1 {
		if toks[0] == "-" {
			return cel.List(val)
		}
		if isIndex(toks[0]) { // padded with nulls up to the index
			n, _ := strconv.Atoi(toks[0])
			elems := make([]cel.Expr, 0, n+1)
			for i := 0; i < n; i++ {
				elems = append(elems, cel.Null())
			}
			return cel.List(append(elems, val)...)
		}
		return cel.Map([]cel.Expr{cel.Str(toks[0])}, []cel.Expr{val})
	}
	return cel.Map([]cel.Expr{cel.Str(toks[0])}, []cel.Expr{created(toks[1:], val)})
}

// exists is true when the object has the path toks (always: the maps it always has).
func exists(cur cel.Expr, toks []string, always map[string]bool) cel.Expr {
	var cs []cel.Expr
	for n, t := range toks {
		if isIndex(t) {
			i, _ := strconv.Atoi(t)
			cs = append(cs, cel.Bin(">", cel.Call("size", cur), cel.Int(int64(i))))
			cur = cel.Index(cur, cel.Int(int64(i)))
			continue
		}
		if !always[pathKey(toks[:n+1])] {
			cs = append(cs, present(cur, t))
		}
		cur = cel.Index(cur, cel.Str(t))
	}
	return cel.And(cs...)
}

func pointerOf(p cel.Pointer, toks []string) cel.Pointer {
	for _, t := range toks {
		p = p.Child(t)
	}
	return p
}

// pointer splits a JSON pointer into its unescaped tokens.
func pointer(s string) ([]string, error) {
	if !strings.HasPrefix(s, "/") || s == "/" {
		return nil, fmt.Errorf("path %q must be a JSON pointer below the object's root", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("path %q has an empty token", s)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func isIndex(t string) bool {
	_, err := strconv.Atoi(t)
	return err == nil
}

// overlaps: is one path a prefix of the other?
func overlaps(a, b []string) bool {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
