package cel

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// objectLabels is the object's labels as the policy sees them when it runs (other policies may
// have added some).
func objectLabels() Expr {
	md := Field(Ident("object"), "metadata")
	return Cond(Bin("in", Str("labels"), md), Field(md, "labels"), Map(nil, nil))
}

// LabelSelector is a CEL condition equal to metav1.LabelSelectorAsSelector(sel).Matches(labels)
// (True for a nil selector). The selector is validated the same way.
func LabelSelector(sel *metav1.LabelSelector, lbls Expr) (Expr, error) {
	if sel == nil {
		return True, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	reqs, selectable := s.Requirements()
	if !selectable {
		return False, nil // labels.Nothing()
	}
	var conds []Expr
	for _, r := range reqs {
		c, err := requirement(r, lbls)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return And(conds...), nil
}

func requirement(r labels.Requirement, lbls Expr) (Expr, error) {
	key := Str(r.Key())
	has := Bin("in", key, lbls)
	val := Index(lbls, key)
	values := r.Values().List()
	sort.Strings(values)
	vals := make([]Expr, len(values))
	for i, v := range values {
		vals[i] = Str(v)
	}
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return And(has, Bin("in", val, List(vals...))), nil
	case selection.NotEquals, selection.NotIn:
		return Or(Not(has), Not(Bin("in", val, List(vals...)))), nil
	case selection.Exists:
		return has, nil
	case selection.DoesNotExist:
		return Not(has), nil
	}
	return nil, fmt.Errorf("label selector operator %q has no CEL translation", r.Operator())
}

// LabelsMatch is the label selector over the object's current labels.
func LabelsMatch(sel *metav1.LabelSelector) (Expr, error) { return LabelSelector(sel, objectLabels()) }

// Has is the has() macro over a field selection the caller built.
func Has(operand Expr, field string) Expr { return Call("has", Field(operand, field)) }
