package kyverno

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/compiler/source"
)

// Policy is one Kyverno ClusterPolicy or Policy with mutate rules, as the front end read it.
type Policy struct {
	Doc        *source.Document
	APIVersion string
	Kind       string // ClusterPolicy or Policy
	Name       string
	// Namespace is a Policy's namespace: it applies only to objects in it. Empty for a
	// ClusterPolicy.
	Namespace string
	// FailurePolicy is Fail (Kyverno's default) or Ignore.
	FailurePolicy string
	// ApplyOne: spec.applyRules One, the rules stop after the first that applied.
	ApplyOne bool
	// Rules are the mutate rules, autogen rules included, in the order Kyverno runs them.
	Rules []*Rule
	// ConfigMap is the one ConfigMap the rules' configMap context entries read (nil: none).
	ConfigMap *ConfigMap
	// MatchConditions are spec.webhookConfiguration.matchConditions: Kyverno runs the policy in
	// a webhook of its own, which the API server calls only where they hold.
	MatchConditions []MatchCondition
}

// MatchCondition is one of a policy's webhook match conditions, a CEL expression the API server
// evaluates, as written.
type MatchCondition struct {
	Name, Expression string
	// At is its index in the list, for messages.
	At int
}

// ConfigMap is a configMap context entry: the ConfigMap a rule reads under the entry's name.
type ConfigMap struct {
	// Entry is the entry's name, the root of the variables that read it ({{entry.data.key}}).
	Entry string
	Name  string
	// Namespace is where Kyverno looks for it: as written, else "default" (for a ClusterPolicy);
	// empty with RequestNamespace.
	Namespace string
	// RequestNamespace: the namespace is {{request.namespace}}, the request's.
	RequestNamespace bool
	// At is the entry's index in the rule's context.
	At int
	// Path and Field are where the entry is written, for messages.
	Path  []string
	Field string
}

// Object names the policy as messages do: "ClusterPolicy/name".
func (p *Policy) Object() string { return p.Kind + "/" + p.Name }

// Rule is one mutate rule.
type Rule struct {
	Name string
	// Field is where the rule is written, for messages ("spec.rules[0]"); autogen rules name the
	// rule they were generated from.
	Field string
	// Path is the document path of the rule, for line numbers.
	Path []string
	// Autogen names the controllers an autogen rule was generated for ("" for a written rule).
	Autogen string
	Match   Block
	Exclude Block
	// Preconditions are checked after the match (nil: none).
	Preconditions *Preconditions
	// StrategicMerge is mutate.patchStrategicMerge (nil when absent).
	StrategicMerge map[string]any
	// JSON6902 are the operations of mutate.patchesJson6902.
	JSON6902 []Op
	// ForEach are mutate.foreach's entries, run in order.
	ForEach []ForEach
	// ConfigMaps are the rule's configMap context entries.
	ConfigMaps []ConfigMap
	// Variables are the rule's variable context entries.
	Variables []Variable
}

// Variable is a variable context entry: under the entry's name, the value (its variables
// substituted) or the whole context, through the JMESPath when given, else the default.
// With Namespace, it is an apiCall entry that reads the request's namespace (a GET of
// /api/v1/namespaces/{{request.namespace}}): the Namespace object through the JMESPath when
// given (Value and Default unused).
type Variable struct {
	Entry string
	// At is the entry's index in the rule's context: an entry reads the entries before it.
	At         int
	Namespace  bool
	Value      any
	HasValue   bool
	JMESPath   string
	Default    any
	HasDefault bool
	// Path and Field are where the entry is written, for messages.
	Path  []string
	Field string
}

// ForEach is one entry of mutate.foreach.
type ForEach struct {
	List string
	// Order is Ascending, Descending or "" (patchStrategicMerge: descending; JSON patch:
	// ascending).
	Order          string
	Preconditions  *Preconditions
	StrategicMerge map[string]any
	JSON6902       []Op
	// ForEach are the nested entries, run for each element in order, instead of a patch.
	ForEach []ForEach
	// Variables are the entry's variable context entries (and apiCall ones reading the
	// request's namespace), which Kyverno loads for each element.
	Variables []Variable
}

// Block is a match or exclude block: Any or All filters (a block written with resources and
// subjects directly is All with that one filter).
type Block struct {
	Any []Filter
	All []Filter
}

// Empty: the block has no filter.
func (b Block) Empty() bool { return len(b.Any) == 0 && len(b.All) == 0 }

// Filter is one resource filter of a block.
type Filter struct {
	Kinds             []string
	Name              string
	Names             []string
	Namespaces        []string
	Operations        []string
	Annotations       map[string]string
	Selector          *metav1.LabelSelector
	NamespaceSelector *metav1.LabelSelector
	// Subjects match the requesting user (kind User, Group or ServiceAccount).
	Subjects []rbacv1.Subject
}

// Empty: the filter names nothing (Kyverno: "match cannot be empty").
func (f Filter) Empty() bool {
	return len(f.Kinds) == 0 && f.Name == "" && len(f.Names) == 0 && len(f.Namespaces) == 0 &&
		len(f.Operations) == 0 && len(f.Annotations) == 0 && f.Selector == nil && f.NamespaceSelector == nil && len(f.Subjects) == 0
}

// Op is one JSON patch operation of patchesJson6902.
type Op struct {
	Op    string
	Path  string
	Value any // strings with variables in plain scalars are PlainText
}

// PlainText is a string of a patchesJson6902 value that holds variables and is a plain
// (unquoted) YAML scalar on one line: Kyverno substitutes the variables' text into the YAML
// before it parses it, so the scalar's type depends on what it reads then.
type PlainText string

// Preconditions are a rule's (or a foreach's) any and all conditions.
type Preconditions struct {
	Any []Condition
	All []Condition
}

// Condition is one precondition: key operator value.
type Condition struct {
	Key      any
	Operator string
	Value    any
}

// Where names the ConfigMap for messages: "namespace/name", or "name in the request's namespace".
func (c *ConfigMap) Where() string {
	if c.RequestNamespace {
		return c.Name + " in the request's namespace"
	}
	return c.Namespace + "/" + c.Name
}
