package cel

import (
	"fmt"
	"sync"

	celgo "github.com/google/cel-go/cel"
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
		TwoVar:  e.Version.AtLeast(version.MajorMinor(1, 33)),
	}
}

var opts = plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true, HasPatchTypes: true}

// celEnv is the cel-go environment with the admission variables, for parsing and printing.
func (e *Env) celEnv() (*celgo.Env, error) {
	env, err := e.envSet.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	// The unparser needs to know which calls were macros.
	return env.Extend(celgo.EnableMacroCallTracking())
}

// Print renders the tree as CEL text in canonical form: the printed tree is parsed again with the
// environment's parser (and macros) and printed back by cel-go's unparser, so that what is
// emitted is exactly what the API server will parse.
func (e *Env) Print(x Expr) (string, error) {
	env, err := e.celEnv()
	if err != nil {
		return "", err
	}
	src := String(x)
	ast, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return "", fmt.Errorf("internal error: generated CEL does not parse: %v\n%s", iss.Err(), src)
	}
	// Wrap long expressions after && and || so that they read well as YAML block scalars.
	out, err := parser.Unparse(ast.NativeRep().Expr(), ast.NativeRep().SourceInfo(),
		parser.WrapOnColumn(100), parser.WrapOnOperators(operators.LogicalAnd, operators.LogicalOr, operators.Conditional))
	if err != nil {
		return "", fmt.Errorf("internal error: cannot print CEL: %v", err)
	}
	return out, nil
}

// CheckJSONPatch compiles a JSONPatch mutation expression exactly as the API server does for a
// new MutatingAdmissionPolicy at this version.
func (e *Env) CheckJSONPatch(expr string) error {
	return e.check(&patch.JSONPatchCondition{Expression: expr})
}

// CheckApplyConfiguration compiles an ApplyConfiguration mutation expression.
func (e *Env) CheckApplyConfiguration(expr string) error {
	return e.check(&patch.ApplyConfigurationCondition{Expression: expr})
}

// CheckCondition compiles a matchCondition expression.
func (e *Env) CheckCondition(expr string) error {
	return e.check(&matchconditions.MatchCondition{Expression: expr})
}

func (e *Env) check(acc plugincel.ExpressionAccessor) error {
	res := e.compiler.CompileCELExpression(acc, opts, environment.NewExpressions)
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
}

// WithVariables compiles vars, in order, and returns a checker for expressions that use them.
func (e *Env) WithVariables(vars []Variable) (*Checker, error) {
	cc, err := plugincel.NewCompositedCompiler(e.envSet)
	if err != nil {
		return nil, err
	}
	for _, v := range vars {
		res := cc.CompileAndStoreVariable(&mutating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
		if res.Error != nil {
			return nil, fmt.Errorf("Kubernetes %s rejects the generated variable %s: %s", e.Version, v.Name, res.Error.Detail)
		}
	}
	return &Checker{env: e, cc: cc}, nil
}

// CheckJSONPatch is Env.CheckJSONPatch for an expression that may use the variables.
func (c *Checker) CheckJSONPatch(expr string) error {
	res := c.cc.CompileCELExpression(&patch.JSONPatchCondition{Expression: expr}, opts, environment.NewExpressions)
	if res.Error != nil {
		return fmt.Errorf("Kubernetes %s rejects the generated expression: %s", c.env.Version, res.Error.Detail)
	}
	return nil
}
