package lower

import (
	"fmt"
	"slices"
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
		item := -1             // where an index inside the path names an item earlier adds went through
		var through [][]string // the paths of those adds
		for i, t := range toks {
			if i == len(toks)-1 {
				break
			}
			if k := negative(t); k > 0 {
				if k > 1 || op.Op != "add" {
					return nil, errorf(field, "a negative list index inside a path is supported as -1 in an add; not %s in %s yet", t, op.Op)
				}
				// -1 reads the list's last item as the object stands: another operation on
				// what the path goes through would change which one.
				for m, o := range ops {
					if ot, err := pointer(o.Path); err == nil && m != n && sharesCreated(ot, toks, always) {
						return nil, errorf(field, "-1 inside the path, with operation [%d] (%s %s) on the same part of the object, is not supported: Kyverno reads the last item as the earlier operations left it; split them into rules", m, o.Op, o.Path)
					}
				}
				continue
			}
			if t == "-" {
				return nil, errorf(field, "\"-\" can only end a path")
			}
			if isIndex(t) && op.Op == "add" {
				if idx, _ := strconv.Atoi(t); idx > maxPadded {
					return nil, errorf(field, "the list index %s inside the path is past %d, which is not supported (Kyverno pads a shorter list with nulls up to it)", t, maxPadded)
				}
				// The item is read as the object stands, or, where earlier adds went through it,
				// as they left it: the object's, or one they made (addThrough). Other earlier
				// operations through it, or other indices in the paths, are not followed.
				for m, o := range ops[:n] {
					ot, err := pointer(o.Path)
					if err != nil || !overlaps(ot, toks[:i+1]) && !(len(ot) > i && slices.Equal(ot[:i], toks[:i])) {
						continue // neither the list nor what holds it
					}
					// An earlier operation on the list itself, on what holds it, on another of its
					// items or on this item's place (an insert) can move or make the items.
					if len(ot) <= i+1 || ot[i] != toks[i] || o.Op != "add" || item >= 0 && item != i || !indexOnlyAt(ot, i) || !indexOnlyAt(toks, i) {
						return nil, errorf(field, "a list index inside the path, after operation [%d] (%s %s) on the same list, is not supported: Kyverno finds the item as the earlier operations left it (an item added or inserted before, another one made, the list replaced); split them into rules, or add through one item only", m, o.Op, o.Path)
					}
					item = i
					through = append(through, ot)
				}
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
			if item >= 0 {
				parts = append(parts, addThrough(cur, base, toks, item, through, val, always))
			} else {
				parts = append(parts, ensureAdd(cur, base, toks, 0, known, val, always))
			}
			done = append(done, toks)
		case "replace":
			val, err := valueOf(op.Value)
			if err != nil {
				return nil, errorf(field, "%v", err)
			}
			if last := toks[len(toks)-1]; last == "-" {
				return nil, errorf(field, "replace at \"-\" fails in Kyverno: there is no such item")
			}
			if k := negative(toks[len(toks)-1]); k > 0 {
				// Kyverno replaces item len-k, and fails where there is none (as the API
				// server does at index len); in a map, the key as it is.
				list := valueAt(cur, toks[:len(toks)-1])
				at := fromEnd(list, k, 0, toks[len(toks)-1])
				parts = append(parts, cel.List(cel.PatchOp("replace", pointerOf(base, toks[:len(toks)-1]).Index(at), val)))
				done = append(done, toks)
				continue
			}
			parts = append(parts, cel.List(cel.PatchOp("replace", pointerOf(base, toks), val)))
			done = append(done, toks)
		case "remove":
			if toks[len(toks)-1] == "-" {
				continue // no such item: nothing to remove
			}
			if k := negative(toks[len(toks)-1]); k > 0 {
				// Kyverno removes item len-k, nothing where there is none; in a map, the key.
				last := toks[len(toks)-1]
				list := valueAt(cur, toks[:len(toks)-1])
				there := cel.Cond(isList(list), cel.Bin(">=", cel.Call("size", list), cel.Int(int64(k))), present(list, last))
				at := cel.Cond(isList(list), cel.Call("string", cel.Bin("-", cel.Call("size", list), cel.Int(int64(k)))), cel.Str(last))
				parts = append(parts, cel.Guarded(cel.And(exists(cur, toks[:len(toks)-1], always), there),
					cel.List(cel.PatchOp("remove", pointerOf(base, toks[:len(toks)-1]).Index(at), nil))))
				removed = append(removed, toks)
				continue
			}
			parts = append(parts, cel.Guarded(exists(cur, toks, always), cel.List(cel.PatchOp("remove", pointerOf(base, toks), nil))))
			removed = append(removed, toks)
		}
	}
	return concat(parts), nil
}

// ensureAdd adds val at toks[d:] below cur (at p), creating what is missing above it; known(d)
// says an earlier operation made toks[:d+1].
//
// A negative last token -k (Kyverno's negative indices) inserts at len+1-k in a list: -1 appends,
// as "-" does, and where the list is missing, Kyverno creates it holding val; any other -k fails
// the rule there, and where it is past the start (as the API server does at index len+1). In a map
// the token is a key as any other.
func ensureAdd(cur cel.Expr, p cel.Pointer, toks []string, d int, known func(int) bool, val cel.Expr, always map[string]bool) cel.Expr {
	if k := negative(toks[len(toks)-1]); k > 1 {
		// No creation: every missing object above fails the rule in Kyverno, as indexing it does.
		list := valueAt(cur, toks[d:len(toks)-1])
		at := fromEnd(list, k, 1, toks[len(toks)-1])
		return cel.List(cel.PatchOp("add", pointerOf(p, toks[d:len(toks)-1]).Index(at), val))
	}
	if d == len(toks)-1 {
		if negative(toks[d]) == 1 {
			return cel.List(cel.PatchOp("add", p.Index(cel.Cond(isList(cur), cel.Str("-"), cel.Str(toks[d]))), val))
		}
		return cel.List(cel.PatchOp("add", p.Child(toks[d]), val))
	}
	t := toks[d]
	if i, err := strconv.Atoi(t); err == nil && i >= 0 {
		// An index inside the path (evanphx/json-patch v5's EnsurePathExistsOnAdd): in a list,
		// its item, or where the list is shorter, nulls up to the index and a new item made for
		// the rest of the path, appended; in a map, the key.
		inItem := ensureAdd(cel.Index(cur, cel.Int(int64(i))), p.Child(t), toks, d+1, func(int) bool { return false }, val, nil)
		parts := make([]cel.Expr, 0, i+1)
		for k := 0; k < i; k++ {
			parts = append(parts, cel.CondList(cel.Bin("<=", cel.Call("size", cur), cel.Int(int64(k))),
				cel.List(cel.PatchOp("add", p.Child("-"), cel.Call("dyn", cel.Null()))), cel.List()))
		}
		parts = append(parts, cel.List(cel.PatchOp("add", p.Child("-"), created(toks[d+1:], val))))
		inList := cel.CondList(cel.Bin(">", cel.Call("size", cur), cel.Int(int64(i))), inItem, concat(parts))
		there := ensureAdd(cel.Index(cur, cel.Str(t)), p.Child(t), toks, d+1, known, val, always)
		field := cel.CondList(present(cur, t), there, cel.List(cel.PatchOp("add", p.Child(t), created(toks[d+1:], val))))
		return cel.CondList(isList(cur), inList, field)
	}
	there := ensureAdd(cel.Index(cur, cel.Str(t)), p.Child(t), toks, d+1, known, val, always)
	if known(d) || always[pathKey(toks[:d+1])] {
		return there
	}
	whenMissing := cel.List(cel.PatchOp("add", p.Child(t), created(toks[d+1:], val)))
	field := cel.CondList(present(cur, t), there, whenMissing)
	if t != "-1" {
		return field
	}
	// -1 inside the path (evanphx/json-patch v5 with negative indices): in a list, its last
	// item, or where it is empty, a new item made for the rest of the path (inserted at
	// index 0, which is appending); in a map, the key "-1".
	last := cel.Bin("-", cel.Call("size", cur), cel.Int(1))
	inLast := ensureAdd(cel.Index(cur, last), p.Index(last), toks, d+1, func(int) bool { return false }, val, nil)
	appended := cel.List(cel.PatchOp("add", p.Child("-"), created(toks[d+1:], val)))
	return cel.CondList(isList(cur), cel.CondList(cel.Bin(">", cel.Call("size", cur), cel.Int(0)), inLast, appended), field)
}

// addThrough adds val at toks, whose token i is an index naming an item that the earlier adds
// at the paths through went through. Where the object had the item, as ensureAdd below it (what
// those adds made there known); where it had none, one of them made it (evanphx/json-patch v5's
// EnsurePathExistsOnAdd), holding only what they made: down that part of the path, then the rest
// created.
func addThrough(cur cel.Expr, base cel.Pointer, toks []string, i int, through [][]string, val cel.Expr, always map[string]bool) cel.Expr {
	made := func(depth int) bool { // an earlier add made toks[:depth+1]
		return slices.ContainsFunc(through, func(d []string) bool { return len(d) > depth && slices.Equal(d[:depth+1], toks[:depth+1]) })
	}
	holder := valueAt(cur, toks[:i])
	idx, _ := strconv.Atoi(toks[i])
	at := pointerOf(base, toks[:i+1])
	had := cel.And(exists(cur, toks[:i], always), cel.Cond(isList(holder), cel.Bin(">", cel.Call("size", holder), cel.Int(int64(idx))), present(holder, toks[i])))
	inObject := cel.CondList(isList(holder),
		ensureAdd(cel.Index(holder, cel.Int(int64(idx))), at, toks, i+1, made, val, nil),
		ensureAdd(cel.Index(holder, cel.Str(toks[i])), at, toks, i+1, made, val, nil))
	k := i + 1
	for k < len(toks)-1 && made(k) {
		k++
	}
	inMade := cel.List(cel.PatchOp("add", pointerOf(base, toks), val))
	if k < len(toks)-1 {
		inMade = cel.List(cel.PatchOp("add", pointerOf(base, toks[:k+1]), created(toks[k+1:], val)))
	}
	return cel.CondList(had, inObject, inMade)
}

// indexOnlyAt: is token i the only list index inside the path toks (its last token aside, unless
// that is a negative index)?
func indexOnlyAt(toks []string, i int) bool {
	for n, t := range toks {
		if n != i && (n < len(toks)-1 && (isIndex(t) || t == "-") || n == len(toks)-1 && negative(t) > 0) {
			return false
		}
	}
	return true
}

// sharesCreated: do the paths a and b go through a common part of the object that an add can
// create (their common prefix, unless it is only maps every object of the kind has)?
func sharesCreated(a, b []string, always map[string]bool) bool {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n > 0 && !always[pathKey(a[:n])]
}

// negative is k for a token "-k" (a negative list index, k > 0), else 0.
func negative(t string) int {
	if !strings.HasPrefix(t, "-") || t == "-" {
		return 0
	}
	n, err := strconv.Atoi(t)
	if err != nil || n >= 0 {
		return 0
	}
	return -n
}

// valueAt is the value at toks below cur, failing where one is missing.
func valueAt(cur cel.Expr, toks []string) cel.Expr {
	for _, t := range toks {
		if isIndex(t) {
			i, _ := strconv.Atoi(t)
			cur = cel.Index(cur, cel.Int(int64(i)))
			continue
		}
		cur = cel.Index(cur, cel.Str(t))
	}
	return cur
}

// maxPadded is the largest list index inside an add's path that is translated.
const maxPadded = 16

func isList(e cel.Expr) cel.Expr { return cel.Bin("==", cel.Call("type", e), cel.Ident("list")) }

// fromEnd is the token for Kyverno's negative index -k (the text token) in list, a list whose
// length grows by extra with the operation (1 for an add): len+extra-k, or where that is below
// 0, len+extra (an index the API server refuses, as Kyverno fails); in a map, token itself.
func fromEnd(list cel.Expr, k, extra int, token string) cel.Expr {
	n := cel.Call("size", list)
	if extra > 0 {
		n = cel.Bin("+", n, cel.Int(int64(extra)))
	}
	idx := cel.Cond(cel.Bin(">=", n, cel.Int(int64(k))), cel.Bin("-", n, cel.Int(int64(k))), n)
	return cel.Cond(isList(list), cel.Call("string", idx), cel.Str(token))
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
	if len(toks) > 1 && toks[0] == "-1" {
		// Kyverno creates a list and, at -1 in it, the item for the rest of the path.
		return cel.List(created(toks[1:], val))
	}
	if i, err := strconv.Atoi(toks[0]); err == nil && i >= 0 && len(toks) > 1 {
		// A list, padded with nulls up to the index, holding the item for the rest of the path.
		elems := make([]cel.Expr, 0, i+1)
		for k := 0; k < i; k++ {
			elems = append(elems, cel.Call("dyn", cel.Null()))
		}
		return cel.List(append(elems, dyn(created(toks[1:], val)))...)
	}
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
	parts := PathTokens(s)
	if slices.Contains(parts, "") {
		return nil, fmt.Errorf("path %q has an empty token", s)
	}
	return parts, nil
}

// PathTokens splits a JSON patch operation's path into its unescaped tokens (none for an empty
// path), as the lowering reads it; the backend's analyses of what a rule writes read paths so.
func PathTokens(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(s, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts
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
