package cel

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

// NamespacedKinds lists the built-in kinds (group, kind) that are namespaced in every
// Kubernetes version mapc targets, for tests that check them against the API server's scopes.
func NamespacedKinds() [][2]string {
	var out [][2]string
	for k := range namespacedKinds {
		out = append(out, k)
	}
	return out
}

// NamespacedKind reports whether group/kind is one of NamespacedKinds: a request for it always
// has a namespace.
func NamespacedKind(group, kind string) bool { return namespacedKinds[[2]string{group, kind}] }
