package lower

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	jmespath "github.com/kyverno/go-jmespath"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// contextVar is a variable context entry lowered: its value, as Kyverno's context holds it once
// the entry is loaded; fallible when loading it can fail (then evaluating v.e fails).
type contextVar struct {
	name     string
	v        value
	fallible bool
}

// Context is sc with the rule's context entries: the names of its configMap entries, and its
// variable entries lowered in order, each reading the entries before it.
//
// Kyverno v1.19.1 loads a rule's context entries lazily (pkg/engine/context deferred.go): an
// entry is loaded when a query's text names it (Loads), before the query is evaluated, and a
// failure to load fails the query, so the rule. Its variable loader
// (pkg/engine/context/loaders/variable.go) substitutes the default's variables, then:
//   - with a value: substitutes its variables, and applies the jmesPath to it when given; an
//     error of the jmesPath gives the default (none: the entry fails), a null result fails;
//   - without a value: evaluates the jmesPath on the whole context (loading the entries before
//     it that the expression names); an error or a null gives the default (none: the entry
//     fails);
//   - without either: the default.
//
// A null result fails the entry. The value is kept as JSON (numbers become float64).
//
// Within a rule without foreach, the object does not change between the queries, so an entry's
// value is the same wherever it is loaded: each variable naming it reads its lowered value.
func Context(r *kyverno.Rule, sc Scope) (Scope, error) {
	vars := map[int]kyverno.Variable{}
	n := 0
	for _, cm := range r.ConfigMaps {
		n = max(n, cm.At+1)
	}
	for _, v := range r.Variables {
		vars[v.At] = v
		n = max(n, v.At+1)
	}
	cms := map[int]string{}
	for _, cm := range r.ConfigMaps {
		cms[cm.At] = cm.Entry
	}
	for i := range n {
		if name, ok := cms[i]; ok {
			sc.ConfigMaps = append(sc.ConfigMaps, name)
			continue
		}
		v, ok := vars[i]
		if !ok {
			continue
		}
		cv, err := contextVariable(v, strings.TrimPrefix(v.Field, r.Field+"."), sc)
		if err != nil {
			return sc, err
		}
		sc.Vars = append(append([]contextVar(nil), sc.Vars...), cv)
	}
	return sc, nil
}

// Loads: does Kyverno's query of text load the context entry named entry? Its deferred loader
// (pkg/engine/context NewDeferredLoader) matches the query with this pattern.
func Loads(entry, text string) bool {
	re := regexp.MustCompile(`(?:\A|\z|\s|[^.0-9A-Za-z])` + regexp.QuoteMeta(entry) + `\b`)
	return re.MatchString(text)
}

// contextVariable lowers one variable entry, on the scope of the entries before it.
// field is where the entry is written, below the rule.
func contextVariable(vr kyverno.Variable, field string, sc Scope) (contextVar, error) {
	refuse := func(sub, format string, args ...any) (contextVar, error) {
		f := field
		if sub != "" {
			f += "." + sub
		}
		return contextVar{}, errorf(f, format, args...)
	}
	refuseErr := func(sub string, err error) (contextVar, error) {
		var fe *FieldError
		if errors.As(err, &fe) {
			return refuse(fe.Field, "%s", fe.Msg)
		}
		return refuse(sub, "%v", err)
	}
	if vr.Namespace {
		return namespaceEntry(vr, refuse, sc)
	}
	cv := contextVar{name: vr.Entry, fallible: true}
	var def cel.Expr
	var defv value
	if vr.HasDefault {
		if len(Variables(vr.Default)) > 0 {
			return refuse("default", "variables in a variable entry's default are not supported yet: give the default itself")
		}
		d, err := literal(jsonValue(vr.Default))
		if err != nil {
			return refuse("default", "%v", err)
		}
		def, defv = d.e, d
	}
	var jp jmespath.ASTNode
	if vr.JMESPath != "" {
		n, err := jmespath.NewParser().Parse(vr.JMESPath)
		if err != nil {
			return refuse("jmesPath", "%q is not JMESPath Kyverno can read (%v): Kyverno fails the rule wherever a variable names the entry", vr.JMESPath, err)
		}
		jp = n
		if def != nil && !isPathStep(n) {
			return refuse("jmesPath", "%q with a default: Kyverno gives the default on any error of the expression, which a MutatingAdmissionPolicy cannot catch; supported with a default: a path of fields and indices", vr.JMESPath)
		}
	}
	nonNull := func(v value) value {
		if v.t&tNull == 0 {
			return v
		}
		c := &lowering{}
		e := c.bind(v.e, v.simple, func(x cel.Expr) cel.Expr {
			return cel.Cond(cel.Bin("==", dyn(x), cel.Null()), fail("the context entry "+vr.Entry+" is null: Kyverno fails the rule"), dyn(x))
		})
		return found(e, v.t&^tNull, false)
	}
	orDefault := func(soft cel.Expr, st types) value {
		c := &lowering{}
		e := c.bind(soft, false, func(x cel.Expr) cel.Expr {
			return cel.Cond(cel.Bin("==", dyn(x), cel.Null()), def, dyn(x))
		})
		return found(e, st&^tNull|defv.t, false)
	}
	var out value
	switch {
	case vr.HasValue:
		s, vars, lossy, err := substitute(jsonValue(vr.Value), sc, "value", true)
		if err != nil {
			return refuseErr("value", err)
		}
		e, err := valueOf(s)
		if err != nil {
			return refuse("value", "%v", err)
		}
		t := typeOf(jsonValue(vr.Value))
		if x, ok := s.(expr); ok {
			t = x.t
		}
		if len(vars) > 0 {
			// Every variable of the value is substituted, its value used or not.
			e = cel.Cond(Resolved(vars), dyn(e), cel.Null())
		}
		val := found(e, t, len(vars) == 0)
		val.lossy, val.jnum = lossy, true
		if vr.JMESPath == "" {
			out = nonNull(val)
			cv.fallible = len(vars) > 0 || t&tNull != 0
			break
		}
		if len(vars) == 0 && isPathStep(jp) {
			// A literal: the path's result is known now (a path errs only on a missing field).
			res, err := jmespath.Search(vr.JMESPath, jsonValue(vr.Value))
			switch {
			case err != nil && def != nil:
				out = defv
				cv.fallible = false
			case err != nil:
				out = found(fail("the context entry "+vr.Entry+": "+err.Error()+": Kyverno fails the rule"), tStr, false)
			case res == nil:
				out = found(fail("the context entry "+vr.Entry+" is null: Kyverno fails the rule"), tStr, false)
			default:
				if out, err = literal(res); err != nil {
					return refuse("jmesPath", "%v", err)
				}
				cv.fallible = false
			}
			break
		}
		c := &lowering{src: vr.JMESPath, sc: sc}
		r, err := c.lower(jp, val)
		if err != nil {
			return refuse("jmesPath", "%v", err)
		}
		if r.virt != real {
			return refuse("jmesPath", "%q is not a value", vr.JMESPath)
		}
		if def == nil || !r.missing {
			out = nonNull(r)
			break
		}
		if r.opt == nil {
			return refuse("jmesPath", "%q with a default on a value that may not be an object is not supported yet", vr.JMESPath)
		}
		// A missing field gives the default, a null the failure.
		e = cel.Cond(cel.Method(r.opt, "hasValue"), cel.Method(r.opt, "value"), def)
		out = nonNull(found(e, r.st|defv.t, false))
	case vr.JMESPath != "":
		v, err := variable(vr.JMESPath, sc)
		if err != nil {
			return refuse("jmesPath", "%v", err)
		}
		if def == nil {
			out = nonNull(v)
			break
		}
		for _, e := range sc.Vars {
			if e.fallible && Loads(e.name, vr.JMESPath) {
				return refuse("jmesPath", "%q reads the context entry %s, which can fail: Kyverno then gives the default, which a MutatingAdmissionPolicy cannot do; not supported", vr.JMESPath, e.name)
			}
		}
		s, err := c0.softValue(v)
		if err != nil {
			return refuse("jmesPath", "%v", err)
		}
		out = orDefault(s.e, s.t)
		out.lossy = s.lossy
		cv.fallible = false
	case def != nil:
		out = defv
		cv.fallible = false
	default:
		return refuse("", "has no value, jmesPath or default: Kyverno fails the rule wherever a variable names the entry; give one")
	}
	out.jnum = true // Kyverno's context holds it as JSON
	cv.v = out
	return cv, nil
}

// namespaceEntry lowers an apiCall entry that reads the request's namespace. Kyverno's apiCall
// loader (pkg/engine/apicall) gets the Namespace object from the API server and applies the
// jmesPath to it when given: an error (a missing field included) fails the entry, a null result
// is kept as null. Without a jmesPath the entry is the whole object, of which the variables may
// read the parts namespaceField supports.
func namespaceEntry(vr kyverno.Variable, refuse func(sub, format string, args ...any) (contextVar, error), sc Scope) (contextVar, error) {
	cv := contextVar{name: vr.Entry}
	root := value{virt: vNamespace}
	if vr.JMESPath == "" {
		cv.v = root
		return cv, nil
	}
	n, err := jmespath.NewParser().Parse(vr.JMESPath)
	if err != nil {
		return refuse("jmesPath", "%q is not JMESPath Kyverno can read (%v): Kyverno fails the rule wherever a variable names the entry", vr.JMESPath, err)
	}
	c := &lowering{src: vr.JMESPath, sc: sc}
	r, err := c.lower(n, root)
	if err != nil {
		return refuse("jmesPath", "%q: %s", vr.JMESPath, strings.TrimPrefix(err.Error(), c.refuse("").Error()))
	}
	if r.virt != real {
		return refuse("jmesPath", "%q: %s is not supported as a value: supported: metadata.name, metadata.labels, metadata.annotations and paths below them", vr.JMESPath, c.virtName(r.virt))
	}
	// Loaded, the entry holds a value: where the jmesPath fails (a function's error, a missing
	// field) loading it fails.
	cv.fallible = r.missing || !isPathStep(n)
	r.jnum = true // Kyverno's context holds it as JSON
	r.missing, r.soft, r.st, r.opt, r.softErr = false, r.e, r.t, nil, nil
	cv.v = r
	return cv, nil
}

// ObjectReads gives, for each of the scope's variable context entries whose value reads the
// object (request.object), in order, its name and the places it reads (cel.Reads).
func ObjectReads(sc Scope) (names []string, reads [][][]string) {
	for _, cv := range sc.Vars {
		if cv.v.virt != real {
			continue // the request's namespace
		}
		if r := cel.Reads(cv.v.e, "object"); len(r) > 0 {
			names = append(names, cv.name)
			reads = append(reads, r)
		}
	}
	return names, reads
}

// c0 is a lowering for the soft values of top-level variables.
var c0 = &lowering{}

// entry is the root name of a variable context entry: its value.
func (c *lowering) entry(cv contextVar) value {
	if cv.v.virt != real {
		return cv.v
	}
	v := found(cv.v.e, cv.v.t, false)
	v.sh, v.jnum, v.ascii, v.tame, v.items, v.lossy = cv.v.sh, cv.v.jnum, cv.v.ascii, cv.v.tame, cv.v.items, cv.v.lossy
	return v
}

// loaded is v with the loads of the fallible context entries whose names the variable's text s
// names: Kyverno loads them before it evaluates s, and a failure fails it.
func loaded(v value, s string, sc Scope) value {
	var checks []cel.Expr
	for _, e := range sc.Vars {
		if e.fallible && Loads(e.name, s) && strings.TrimSpace(s) != e.name {
			checks = append(checks, dyn(e.v.e))
		}
	}
	if len(checks) == 0 {
		return v
	}
	wrap := func(x cel.Expr) cel.Expr {
		return cel.Index(cel.List(append(checks, dyn(x))...), cel.Int(int64(len(checks))))
	}
	v.e = wrap(v.e)
	if v.soft != nil {
		v.soft = wrap(v.soft)
	}
	v.opt, v.simple = nil, false
	return v
}

// jsonValue is v as Kyverno's loader reads it: through JSON, numbers as float64.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}
