package cel

import "github.com/mapc-dev/mapc/compiler/ir"

// namespacedKinds are built-in kinds (group, kind) that are namespaced in every Kubernetes
// version: the API server sends every admission request for one of them with its namespace
// (an object created without one gets the request's, "default" by kubectl's choice). The list
// is short on purpose: a kind missing from it only keeps its namespace tests.
var namespacedKinds = map[[2]string]bool{
	{"", "Pod"}: true, {"", "Service"}: true, {"", "ConfigMap"}: true, {"", "Secret"}: true,
	{"", "ServiceAccount"}: true, {"", "PersistentVolumeClaim"}: true, {"", "ReplicationController"}: true,
	{"", "Endpoints"}: true, {"", "LimitRange"}: true, {"", "ResourceQuota"}: true, {"", "PodTemplate"}: true,
	{"apps", "Deployment"}: true, {"apps", "StatefulSet"}: true, {"apps", "DaemonSet"}: true,
	{"apps", "ReplicaSet"}: true, {"apps", "ControllerRevision"}: true,
	{"batch", "Job"}: true, {"batch", "CronJob"}: true,
	{"networking.k8s.io", "Ingress"}: true, {"networking.k8s.io", "NetworkPolicy"}: true,
	{"rbac.authorization.k8s.io", "Role"}: true, {"rbac.authorization.k8s.io", "RoleBinding"}: true,
	{"policy", "PodDisruptionBudget"}: true, {"autoscaling", "HorizontalPodAutoscaler"}: true,
	{"coordination.k8s.io", "Lease"}: true, {"discovery.k8s.io", "EndpointSlice"}: true,
}

// NamespacedKinds lists namespacedKinds (group, kind), for tests that check them against the
// API server's scopes.
func NamespacedKinds() [][2]string {
	var out [][2]string
	for k := range namespacedKinds {
		out = append(out, k)
	}
	return out
}

// namespacedOnly: are rules (a policy's) all for kinds of namespacedKinds?
func namespacedOnly(rules []ir.Rule) bool {
	for _, r := range rules {
		if !namespacedKinds[[2]string{r.Group, r.Kind}] {
			return false
		}
	}
	return len(rules) > 0
}

// isEmptyNamespaceTest: is x a test that the request's namespace is empty
// ((has(request.namespace) ? request.namespace : "") == ""), or Gatekeeper's namespace of the
// object, which is the object's name for Namespaces, empty ((Namespace test ? name : request
// namespace) == "")? For a namespaced kind (not Namespace) both are false.
func isEmptyNamespaceTest(x binary) bool {
	if x.op != "==" || !isLit(x.r, `""`) {
		return false
	}
	l := x.l
	if c, ok := l.(cond); ok {
		if b, ok := c.c.(binary); ok && isNamespaceTest(b) {
			l = c.f
		}
	}
	c, ok := l.(cond)
	if !ok || !isLit(c.f, `""`) {
		return false
	}
	f, ok := c.t.(field)
	if !ok || !isRequestField(f, "namespace") {
		return false
	}
	h, ok := c.c.(call)
	return ok && h.fn == "has" && len(h.args) == 1 && isRequestFieldExpr(h.args[0], "namespace")
}

// isRequestFieldExpr: is e request.<names...>?
func isRequestFieldExpr(e Expr, names ...string) bool {
	f, ok := e.(field)
	return ok && isRequestField(f, names...)
}
