package admission

import (
	"fmt"

	v1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// compilePolicy is a copy of the unexported compilePolicy in
// k8s.io/apiserver/pkg/admission/plugin/policy/mutating/compilation.go
// (v0.37.1). It only composes exported pieces of k8s.io/apiserver (the CEL
// composited compiler, the match-condition matcher and the JSONPatch /
// ApplyConfiguration patchers); it is copied because generic.NewPolicySource
// needs the compile function and mutating does not export it. Keep it in
// sync with the upstream function when k8s.io/apiserver is upgraded.
func compilePolicy(policy *v1.MutatingAdmissionPolicy) mutating.PolicyEvaluator {
	opts := plugincel.OptionalVariableDeclarations{HasParams: policy.Spec.ParamKind != nil, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return mutating.PolicyEvaluator{Error: &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInternal,
			Detail: fmt.Sprintf("failed to initialize CEL compiler: %v", err),
		}}
	}

	// Compile and store variables
	compiler.CompileAndStoreVariables(convertV1Variables(policy.Spec.Variables), opts, environment.StoredExpressions)

	// Compile matchers
	var matcher matchconditions.Matcher = nil
	matchConditions := policy.Spec.MatchConditions
	if len(matchConditions) > 0 {
		matchExpressionAccessors := make([]plugincel.ExpressionAccessor, len(matchConditions))
		for i := range matchConditions {
			matchExpressionAccessors[i] = (*matchconditions.MatchCondition)(&matchConditions[i])
		}
		conditions := &meteredConditions{compiler.CompileCondition(matchExpressionAccessors, opts, environment.StoredExpressions), policy.Name}
		matcher = matchconditions.NewMatcher(conditions, policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
		matcher = &tracedMatcher{matcher, ignores(policy.Spec.FailurePolicy)} // mapc: see Trace
	}

	// Compiler patchers
	var patchers []patch.Patcher
	patchOptions := opts
	patchOptions.HasPatchTypes = true
	// (mapc: each evaluator is wrapped to record its cost when the context asks for it, see
	// CostRecord, and each patcher to record the failures failurePolicy Ignore swallows, see
	// Trace.)
	ignore := ignores(policy.Spec.FailurePolicy)
	for i, m := range policy.Spec.Mutations {
		switch m.PatchType {
		case v1.PatchTypeJSONPatch:
			if m.JSONPatch != nil {
				accessor := &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}
				compileResult := compiler.CompileMutatingEvaluator(accessor, patchOptions, environment.StoredExpressions)
				patchers = append(patchers, &tracedPatcher{patch.NewJSONPatcher(&meteredMutation{compileResult, policy.Name, i}), policy.Name, i, ignore})
			}
		case v1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration != nil {
				accessor := &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}
				compileResult := compiler.CompileMutatingEvaluator(accessor, patchOptions, environment.StoredExpressions)
				patchers = append(patchers, &tracedPatcher{patch.NewApplyConfigurationPatcher(&meteredMutation{compileResult, policy.Name, i}), policy.Name, i, ignore})
			}
		}
	}

	return mutating.PolicyEvaluator{Matcher: matcher, Mutators: patchers, CompositedCompiler: compiler}
}

// convertV1Variables is a copy of the unexported function of the same name
// in mutating/compilation.go.
func convertV1Variables(variables []v1.Variable) []plugincel.NamedExpressionAccessor {
	if variables == nil {
		return nil
	}
	res := make([]plugincel.NamedExpressionAccessor, len(variables))
	for i, v := range variables {
		res[i] = &validating.Variable{
			Name:       v.Name,
			Expression: v.Expression,
		}
	}
	return res
}
