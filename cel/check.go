package cel

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/parser"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Env is the API server's CEL environment for MutatingAdmissionPolicy expressions at one
// Kubernetes version, in the strict mode the API server uses for new expressions: the features of
// the previous minor version (ext.TwoVarComprehensions came in 1.32, so new expressions may use
// them from 1.33; lists.flatten came in 1.34, so from 1.35).
type Env struct {
	Version  *version.Version
	compiler plugincel.Compiler
	envSet   *environment.EnvSet
	shapes   shapeCache
	// bools holds the texts of variable expressions that compiled to bool without reading
	// other variables (WithVariables).
	bools shapeCache

	macrosOnce sync.Once
	macros     []celgo.Macro // the parser's macros, for printing (see astBuilder)
}

// parserMacros returns the macros of the environment's parser.
func (e *Env) parserMacros() []celgo.Macro {
	e.macrosOnce.Do(func() {
		if env, err := e.celEnv(); err == nil {
			e.macros = env.Macros()
		}
	})
	return e.macros
}

var envs sync.Map // "1.34" -> *Env

// NewEnv returns the environment of Kubernetes major.minor.
func NewEnv(v *version.Version) *Env {
	key := fmt.Sprintf("%d.%d", v.Major(), v.Minor())
	if e, ok := envs.Load(key); ok {
		return e.(*Env)
	}
	// An API server checks new expressions against the previous minor version's CEL features, so
	// that a rollback by one version still understands them (its default compatibility version).
	set := environment.MustBaseEnvSet(version.MajorMinor(v.Major(), v.Minor()-1))
	e := &Env{Version: version.MajorMinor(v.Major(), v.Minor()), compiler: plugincel.NewCompiler(set), envSet: set}
	actual, _ := envs.LoadOrStore(key, e)
	return actual.(*Env)
}

// Features says which optional functions this environment has.
func (e *Env) Features() Features {
	return Features{
		Flatten: e.Version.AtLeast(version.MajorMinor(1, 35)),
		Lists:   e.Version.AtLeast(version.MajorMinor(1, 35)),
		TwoVar:  e.Version.AtLeast(version.MajorMinor(1, 33)),
		Semver:  e.Version.AtLeast(version.MajorMinor(1, 34)),
	}
}

var opts = plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true, HasPatchTypes: true}

// paramOpts are the declarations of a policy with spec.paramKind: params besides.
var paramOpts = plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true, HasPatchTypes: true}

// celEnv is the cel-go environment with the admission variables, for parsing and printing.
func (e *Env) celEnv() (*celgo.Env, error) {
	env, err := e.envSet.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	// The unparser needs to know which calls were macros.
	return env.Extend(celgo.EnableMacroCallTracking())
}

// Print renders the tree as CEL text in canonical form: cel-go's unparser prints the syntax tree
// that cel-go's parser makes of the expression (TestPrintMatchesParser and SelfCheck compare it
// with printParsed, which parses the text with the environment's parser and macros), so that what
// is emitted is exactly what the API server will parse.
func (e *Env) Print(x Expr) (string, error) {
	b := astBuilder{fac: ast.NewExprFactory(), info: ast.NewSourceInfo(nil), macros: e.parserMacros()}
	tree, err := b.build(x)
	if err != nil {
		return "", fmt.Errorf("internal error: cannot print CEL: %v", err)
	}
	out, err := unparse(tree, b.info)
	if err != nil {
		return "", err
	}
	if n := utf8.RuneCountInString(out); n > MaxExpressionCodePoints {
		return "", fmt.Errorf("the expression is %d code points long, above the %d the API server's CEL parser accepts: what it writes is too large for one mutation (shorten the value)", n, MaxExpressionCodePoints)
	}
	if selfCheck.Load() {
		parsed, perr := e.printParsed(x)
		if perr != nil {
			return "", perr
		}
		if parsed != out {
			return "", fmt.Errorf("internal error: CEL printed as\n%s\nparses and prints as\n%s", out, parsed)
		}
	}
	return out, err
}

var selfCheck atomic.Bool

// SelfCheck turns on checks too slow for every compile, which tests turn on for everything they
// compile: every Print also parses the expression's text and prints that, and fails when the two
// differ; and the compiler type-checks each fused expression whole as well as part by part (see
// SelfChecking).
func SelfCheck(on bool) { selfCheck.Store(on) }

// SelfChecking reports whether SelfCheck is on.
func SelfChecking() bool { return selfCheck.Load() }

// unparse prints a tree, wrapping long expressions after && and || so that they read well as
// YAML block scalars.
func unparse(tree ast.Expr, info *ast.SourceInfo) (string, error) {
	out, err := parser.Unparse(tree, info,
		parser.WrapOnColumn(100), parser.WrapOnOperators(operators.LogicalAnd, operators.LogicalOr, operators.Conditional))
	if err != nil {
		return "", fmt.Errorf("internal error: cannot print CEL: %v", err)
	}
	return out, nil
}

// printParsed is Print by way of the text: the printed tree is parsed again with the
// environment's parser (and macros) and printed back by cel-go's unparser.
func (e *Env) printParsed(x Expr) (string, error) {
	env, err := e.celEnv()
	if err != nil {
		return "", err
	}
	src := String(x)
	tree, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return "", fmt.Errorf("internal error: generated CEL does not parse: %v\n%s", iss.Err(), src)
	}
	return unparse(tree.NativeRep().Expr(), tree.NativeRep().SourceInfo())
}

// CheckJSONPatch compiles a JSONPatch mutation expression exactly as the API server does for a
// new MutatingAdmissionPolicy at this version.
func (e *Env) CheckJSONPatch(expr string) error {
	return e.check(&patch.JSONPatchCondition{Expression: expr})
}

// CheckJSONPatchWithParams is CheckJSONPatch for a policy with spec.paramKind: the expression
// can read params.
func (e *Env) CheckJSONPatchWithParams(expr string) error {
	return e.checkWith(&patch.JSONPatchCondition{Expression: expr}, paramOpts)
}

// CheckApplyConfiguration compiles an ApplyConfiguration mutation expression.
func (e *Env) CheckApplyConfiguration(expr string) error {
	return e.check(&patch.ApplyConfigurationCondition{Expression: expr})
}

// CheckCondition compiles a matchCondition expression.
func (e *Env) CheckCondition(expr string) error {
	return e.check(&matchconditions.MatchCondition{Expression: expr})
}

// ListPieces divides list-valued expressions into the pieces that decide their type, for
// checking one by one: the operands of +, and the branches of a conditional whose condition is
// boolean by construction (this checker's bool variables, literals, and !, && and || of them),
// recursively. Each piece a list of T makes the expression a list of T. (cel-go's checker takes
// time quadratic in the generic calls of what it checks at once, and a fused expression's parts
// are sums of many guarded operations: checked as pieces they also repeat shapes more.)
func (c *Checker) ListPieces(xs ...Expr) []Expr {
	var out []Expr
	var add func(Expr)
	add = func(x Expr) {
		switch e := x.(type) {
		case binary:
			if e.op == "+" {
				add(e.l)
				add(e.r)
				return
			}
		case cond:
			if c.boolean(e.c) {
				add(e.t)
				add(e.f)
				return
			}
		}
		out = append(out, x)
	}
	for _, x := range xs {
		add(x)
	}
	return out
}

// boolean: is x a bool whatever the object, by its syntax and this checker's variables' types?
func (c *Checker) boolean(x Expr) bool {
	switch e := x.(type) {
	case lit:
		return e.text == "true" || e.text == "false"
	case unary:
		return e.op == "!" && c.boolean(e.x)
	case binary:
		return (e.op == "&&" || e.op == "||") && c.boolean(e.l) && c.boolean(e.r)
	}
	name, ok := AsVarRef(x)
	return ok && c.types[name] == "bool"
}

// CheckJSONPatchExpr is CheckJSONPatch for a tree: an expression of a shape that compiled before
// in this environment is not compiled again (see Shape).
func (e *Env) CheckJSONPatchExpr(x Expr) error {
	return e.shapes.check("jsonpatch", x, e.CheckJSONPatch)
}

// CheckJSONPatchWithParamsExpr is CheckJSONPatchWithParams for a tree, remembering shapes as
// CheckJSONPatchExpr does.
func (e *Env) CheckJSONPatchWithParamsExpr(x Expr) error {
	return e.shapes.check("jsonpatch-params", x, e.CheckJSONPatchWithParams)
}

// CheckConditionExpr is CheckCondition for a tree, remembering shapes as CheckJSONPatchExpr does.
func (e *Env) CheckConditionExpr(x Expr) error {
	return e.shapes.check("condition", x, e.CheckCondition)
}

// shapeCache remembers the shapes of expressions that compiled (never failures: an error is
// always reported for the expression at hand). Type-checking is most of the compiler's time, and
// generated policies repeat a few shapes with different strings (names, keys, values). Env.bools
// keys it by variable texts instead (has, add).
type shapeCache struct {
	mu sync.Mutex
	ok map[string]bool
}

// MaxExpressionCodePoints is the longest expression the API server's CEL parser accepts: cel-go's
// default, which its CEL environments keep.
const MaxExpressionCodePoints = 100_000

// maxShapes bounds the cache of a long-running process; when full it starts again.
const maxShapes = 100000

func (c *shapeCache) check(scope string, x Expr, check func(string) error) error {
	key := scope + "\x00" + Shape(x)
	if c.has(key) {
		return nil
	}
	if err := check(String(x)); err != nil {
		return err
	}
	c.add(key)
	return nil
}

func (c *shapeCache) has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok[key]
}

func (c *shapeCache) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil || len(c.ok) >= maxShapes {
		c.ok = map[string]bool{}
	}
	c.ok[key] = true
}

func (e *Env) check(acc plugincel.ExpressionAccessor) error {
	return e.checkWith(acc, opts)
}

func (e *Env) checkWith(acc plugincel.ExpressionAccessor, o plugincel.OptionalVariableDeclarations) error {
	res := e.compiler.CompileCELExpression(acc, o, environment.NewExpressions)
	if res.Error != nil {
		return fmt.Errorf("Kubernetes %s rejects the generated expression: %s", e.Version, res.Error.Detail)
	}
	return nil
}

var _ = admissionregistrationv1.PatchTypeJSONPatch

// VarRef is a reference to a policy variable (spec.variables), variables.<name>.
func VarRef(name string) Expr { return Field(Ident("variables"), name) }

// Variable is a policy variable, printed.
type Variable struct {
	Name       string
	Expression string
}

// Checker compiles the expressions of one policy that declares variables, as the API server
// compiles them (its composited compiler: variables typed by their own expressions).
type Checker struct {
	env *Env
	cc  *plugincel.CompositedCompiler
	// scope is the variables' names and types: expressions of one shape type-check alike in
	// every checker of the same scope.
	scope string
	types map[string]string // each variable's type, by name
}

// VariableType is the type the API server gives variable name ("" for none such), as CEL
// names it ("bool", ...).
func (c *Checker) VariableType(name string) string { return c.types[name] }

// WithVariables compiles vars, in order, and returns a checker for expressions that use them.
func (e *Env) WithVariables(vars []Variable) (*Checker, error) {
	cc, err := plugincel.NewCompositedCompiler(e.envSet)
	if err != nil {
		return nil, err
	}
	scope := "jsonpatch"
	types := map[string]string{}
	for _, v := range vars {
		// A boolean variable that reads no other one, compiled before: only its type matters
		// to the expressions checked with it, and true has that type. (Policies of thousands
		// of mutators have a guard variable each, and are compiled again when divided.)
		expr := v.Expression
		known := !strings.Contains(expr, "variables") && e.bools.has(expr)
		if known {
			expr = "true"
		}
		res := cc.CompileAndStoreVariable(&mutating.Variable{Name: v.Name, Expression: expr}, opts, environment.NewExpressions)
		if res.Error != nil {
			return nil, fmt.Errorf("Kubernetes %s rejects the generated variable %s: %s", e.Version, v.Name, res.Error.Detail)
		}
		t := res.OutputType.String()
		if !known && t == "bool" && !strings.Contains(expr, "variables") {
			e.bools.add(expr)
		}
		scope += "\x00" + v.Name + ":" + t
		types[v.Name] = t
	}
	return &Checker{env: e, cc: cc, scope: scope, types: types}, nil
}

// CheckJSONPatchExpr is CheckJSONPatch for a tree, remembering shapes as Env.CheckJSONPatchExpr.
func (c *Checker) CheckJSONPatchExpr(x Expr) error {
	return c.env.shapes.check(c.scope, x, c.CheckJSONPatch)
}

// CheckJSONPatch is Env.CheckJSONPatch for an expression that may use the variables.
func (c *Checker) CheckJSONPatch(expr string) error {
	res := c.cc.CompileCELExpression(&patch.JSONPatchCondition{Expression: expr}, opts, environment.NewExpressions)
	if res.Error != nil {
		return fmt.Errorf("Kubernetes %s rejects the generated expression: %s", c.env.Version, res.Error.Detail)
	}
	return nil
}

// CheckExpr checks a mutation expression that may use the variables, of a policy with
// spec.paramKind (params) or without, JSONPatch or ApplyConfiguration (apply), remembering
// shapes as Env.CheckJSONPatchExpr.
func (c *Checker) CheckExpr(x Expr, apply, params bool) error {
	o := opts
	if params {
		o = paramOpts
	}
	scope := fmt.Sprintf("%s\x00apply=%t,params=%t", c.scope, apply, params)
	return c.env.shapes.check(scope, x, func(expr string) error {
		var acc plugincel.ExpressionAccessor = &patch.JSONPatchCondition{Expression: expr}
		if apply {
			acc = &patch.ApplyConfigurationCondition{Expression: expr}
		}
		res := c.cc.CompileCELExpression(acc, o, environment.NewExpressions)
		if res.Error != nil {
			return fmt.Errorf("Kubernetes %s rejects the generated expression: %s", c.env.Version, res.Error.Detail)
		}
		return nil
	})
}

// Identifiers lists the identifiers expr reads (variables of the environment, and a
// comprehension's own), each once, in order; an expression that does not parse is an error.
func (e *Env) Identifiers(expr string) ([]string, error) {
	env, err := e.celEnv()
	if err != nil {
		return nil, err
	}
	parsed, iss := env.Parse(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	var out []string
	seen := map[string]bool{}
	ast.PostOrderVisit(parsed.NativeRep().Expr(), ast.NewExprVisitor(func(x ast.Expr) {
		// (Macros' accumulators, @result, are the parser's own.)
		if x.Kind() == ast.IdentKind && !strings.HasPrefix(x.AsIdent(), "@") && !seen[x.AsIdent()] {
			seen[x.AsIdent()] = true
			out = append(out, x.AsIdent())
		}
	}))
	return out, nil
}
