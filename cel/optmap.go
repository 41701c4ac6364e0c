package cel

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
