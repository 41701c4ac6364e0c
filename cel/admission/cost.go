package admission

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
)

// CostRecord collects the CEL runtime cost of the expressions evaluated by an Admit whose
// context came from WithCostRecord: what each evaluation took from the budget the API server's
// plugin gives it (its evaluators count cost with cel-go's runtime cost tracker; variables are
// charged to the expression that first reads them). It is safe for concurrent use.
type CostRecord struct {
	mu    sync.Mutex
	costs []ExprCost
}

// ExprCost is the cost of one evaluation.
type ExprCost struct {
	Policy string
	// Expression is "mutations[i]" or "matchConditions" (all of a policy's match conditions
	// share one budget in the API server).
	Expression string
	Cost       int64
	// Operations is the number of JSONPatch operations a JSONPatch mutation gave (0 for match
	// conditions and ApplyConfiguration mutations): each one the API server converts, marshals
	// and applies on its own, so they, more than the CEL cost, decide what a mutation costs it.
	Operations int
}

type costKey struct{}

// WithCostRecord returns a context whose admissions record their CEL cost in r.
func WithCostRecord(ctx context.Context, r *CostRecord) context.Context {
	return context.WithValue(ctx, costKey{}, r)
}

// Costs returns the evaluations recorded so far, in order.
func (r *CostRecord) Costs() []ExprCost {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ExprCost(nil), r.costs...)
}

func record(ctx context.Context, policy, expr string, budget, remaining int64, ops int, err error) {
	r, ok := ctx.Value(costKey{}).(*CostRecord)
	if !ok || err != nil || remaining < 0 {
		return
	}
	r.mu.Lock()
	r.costs = append(r.costs, ExprCost{Policy: policy, Expression: expr, Cost: budget - remaining, Operations: ops})
	r.mu.Unlock()
}

// meteredMutation is a mutation's evaluator that records its cost.
type meteredMutation struct {
	plugincel.MutatingEvaluator
	policy string
	index  int
}

func (m *meteredMutation) ForInput(ctx context.Context, va *admission.VersionedAttributes, req *admissionv1.AdmissionRequest, in plugincel.OptionalVariableBindings, ns *corev1.Namespace, budget int64) (plugincel.EvaluationResult, int64, error) {
	res, remaining, err := m.MutatingEvaluator.ForInput(ctx, va, req, in, ns, budget)
	ops := 0
	if l, ok := res.EvalResult.(traits.Lister); ok { // a JSONPatch mutation's operations (an ApplyConfiguration gives an object)
		if n, ok := l.Size().(types.Int); ok {
			ops = int(n)
		}
	}
	record(ctx, m.policy, fmt.Sprintf("mutations[%d]", m.index), budget, remaining, ops, err)
	return res, remaining, err
}

// meteredConditions is a policy's match conditions' evaluator that records their cost.
type meteredConditions struct {
	plugincel.ConditionEvaluator
	policy string
}

func (m *meteredConditions) ForInput(ctx context.Context, va *admission.VersionedAttributes, req *admissionv1.AdmissionRequest, in plugincel.OptionalVariableBindings, ns *corev1.Namespace, budget int64) ([]plugincel.EvaluationResult, int64, error) {
	res, remaining, err := m.ConditionEvaluator.ForInput(ctx, va, req, in, ns, budget)
	record(ctx, m.policy, "matchConditions", budget, remaining, 0, err)
	// For Trace: the errors the matcher may ignore.
	if err != nil {
		recordConditionError(ctx, Failure{Policy: m.policy, Expression: "spec.matchConditions", Err: err.Error()})
	}
	for i, r := range res {
		if r.Error == nil {
			continue
		}
		expr := fmt.Sprintf("spec.matchConditions[%d]", i)
		if mc, ok := r.ExpressionAccessor.(*matchconditions.MatchCondition); ok {
			expr += fmt.Sprintf(" (%s)", mc.Name)
		}
		recordConditionError(ctx, Failure{Policy: m.policy, Expression: expr, Err: r.Error.Error()})
	}
	return res, remaining, err
}
