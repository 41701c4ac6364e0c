package cel

// ApplyConfiguration expressions: an Object{...} the API server merges into the object as a
// server-side apply does (maps and structs field by field, atomic lists and maps replaced). The
// front ends build them where that merge gives their engine's result exactly.

// emptyObject is Object{}, an apply that changes nothing.
var emptyObject = object{typeName: "Object"}

// EmptyObject is Object{}: an ApplyConfiguration that changes nothing.
func EmptyObject() Expr { return emptyObject }

// IsEmptyObject reports whether e is Object{}.
func IsEmptyObject(e Expr) bool {
	o, ok := e.(object)
	return ok && o.typeName == "Object" && len(o.fields) == 0
}

// GuardedObject is c ? obj : Object{} for an ApplyConfiguration, simplified as Guarded is.
func GuardedObject(c, obj Expr) Expr { return condList(c, obj, emptyObject) }

// OptMap is a map literal whose entries marked opt have optional values (written ?key: v): an
// entry only where the optional has a value.
func OptMap(keys, vals []Expr, opt []bool) Expr {
	for _, o := range opt {
		if o {
			return optMap{keys, vals, opt}
		}
	}
	return mapExpr{keys, vals}
}

type optMap struct {
	keys, vals []Expr
	opt        []bool
}

func (m optMap) write(b *writer) {
	b.WriteByte('{')
	for i := range m.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if m.opt[i] {
			b.WriteByte('?')
		}
		m.keys[i].write(b)
		b.WriteString(": ")
		m.vals[i].write(b)
	}
	b.WriteByte('}')
}
