package gen

// The generator only writes fields that exist in the typed objects with the right JSON type: the
// API server decodes every admitted object into its Go type, so a string in an int field would be
// a different failure (and verify.Normalize would reject Gatekeeper's result). This file is the
// part of the core/v1 and apps/v1 schemas the generator knows, with pools of values small enough
// that independently generated mutators and objects meet on the same keys.

type kind int

const (
	kObject     kind = iota // fixed fields
	kMap                    // string keys from a pool, values of elem's type
	kList                   // list of objects, selected by a key field
	kScalarList             // list of scalars or objects used as a set (ModifySet)
	kString
	kInt
	kBool
	kQuantity // resource.Quantity: string, int or float
	kImage    // a container image reference
)

type node struct {
	kind   kind
	fields []field // kObject
	elem   *node   // kMap values, kList and kScalarList elements
	keys   []string
	// kList: the key fields the location may select elements by (the first is the natural one).
	// kMap: the pool of keys.
	strs []string // kString: the pool of values
	ints []int64  // kInt: the pool of values
	// required: fields every generated value of this object has (a container's name).
	required []string
}

type field struct {
	name string
	n    *node
}

func (n *node) field(name string) *node {
	for _, f := range n.fields {
		if f.name == name {
			return f.n
		}
	}
	return nil
}

func obj(fields ...field) *node    { return &node{kind: kObject, fields: fields} }
func f(name string, n *node) field { return field{name, n} }
func str(pool ...string) *node     { return &node{kind: kString, strs: pool} }
func integer(pool ...int64) *node {
	return &node{kind: kInt, ints: pool}
}
func boolean() *node                      { return &node{kind: kBool} }
func quantity() *node                     { return &node{kind: kQuantity} }
func image() *node                        { return &node{kind: kImage} }
func strMap(keys []string, v *node) *node { return &node{kind: kMap, keys: keys, elem: v} }
func set(elem *node) *node                { return &node{kind: kScalarList, elem: elem} }
func keyed(elem *node, keys ...string) *node {
	return &node{kind: kList, elem: elem, keys: keys}
}

// Pools shared by mutators and objects, so that locations find (or miss) what objects hold.
var (
	ContainerNames = []string{"main", "app", "sidecar", "networking", "istio-proxy"}
	EnvNames       = []string{"A", "B", "LOG_LEVEL", "http.proxy"}
	LabelKeys      = []string{"team", "app", "env", "app.kubernetes.io/name"}
	LabelValues    = []string{"a", "b", "web", "prod"}
	AnnotationKeys = []string{"owner", "example.com/x", "example.com/x y", "a.b/c.d", "note", "a.b"}
	NodeSelKeys    = []string{"disk", "kubernetes.io/os", "example.com/zone", "a b", "1st", "topology.zone"}
	freeStrings    = []string{"x", "", "a b", "x:y", "ünï", `q"uote`, "v1", "/a/b", "*"}
	Images         = []string{
		"nginx", "nginx:1.2", "docker.io/library/nginx:1.25",
		"localhost:5000/app@sha256:" + hex64, "my.reg/a/b:c", "localhost/app", "gcr.io/proj/img@sha256:" + hex64,
		"registry:5000/x", "busybox:latest", "a/b/c", "",
	}
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var (
	strList = set(str("a", "b", "--v=2", "sleep", "x y"))

	container = &node{kind: kObject, required: []string{"name"}, fields: []field{
		f("name", str(ContainerNames...)),
		f("image", image()),
		f("imagePullPolicy", str("Always", "IfNotPresent", "Never")),
		f("args", strList),
		f("command", set(str("/bin/sh", "-c", "sleep", "run"))),
		f("workingDir", str(freeStrings...)),
		f("env", keyed(&node{kind: kObject, required: []string{"name"}, fields: []field{
			f("name", str(EnvNames...)),
			f("value", str(freeStrings...)),
		}}, "name", "value")),
		f("ports", keyed(&node{kind: kObject, fields: []field{
			f("name", str("http", "metrics", "grpc")),
			f("containerPort", integer(80, 8080, 9090)),
			f("protocol", str("TCP", "UDP")),
		}}, "name", "protocol")),
		f("resources", obj(
			f("limits", strMap([]string{"cpu", "memory", "example.com/gpu"}, quantity())),
			f("requests", strMap([]string{"cpu", "memory"}, quantity())),
		)),
		f("securityContext", obj(
			f("runAsUser", integer(0, 1000, 65534)),
			f("privileged", boolean()),
			f("runAsNonRoot", boolean()),
			f("allowPrivilegeEscalation", boolean()),
			f("readOnlyRootFilesystem", boolean()),
			f("capabilities", obj(
				f("add", set(str("NET_ADMIN", "SYS_TIME"))),
				f("drop", set(str("ALL", "NET_RAW"))),
			)),
		)),
		f("volumeMounts", keyed(&node{kind: kObject, required: []string{"name"}, fields: []field{
			f("name", str("data", "cache", "tmp")),
			f("mountPath", str("/data", "/cache", "/tmp")),
			f("readOnly", boolean()),
		}}, "name", "mountPath")),
	}}

	toleration = &node{kind: kObject, fields: []field{
		f("key", str("dedicated", "example.com/gpu", "node.kubernetes.io/not-ready")),
		f("operator", str("Exists", "Equal")),
		f("value", str("a", "b")),
		f("effect", str("NoSchedule", "NoExecute", "PreferNoSchedule")),
		f("tolerationSeconds", integer(0, 300)),
	}}

	podSpec = obj(
		f("containers", keyed(container, "name", "image")),
		f("initContainers", keyed(container, "name")),
		f("dnsPolicy", str("ClusterFirst", "Default", "None", "ClusterFirstWithHostNet")),
		f("nodeSelector", strMap(NodeSelKeys, str("linux", "ssd", "a", "x y"))),
		f("tolerations", keyed(toleration, "key", "effect")),
		f("securityContext", obj(
			f("runAsUser", integer(0, 1000, 65534)),
			f("runAsGroup", integer(0, 3000)),
			f("runAsNonRoot", boolean()),
			f("fsGroup", integer(2000, 0)),
			f("supplementalGroups", set(integer(1, 2, 3, 1000))),
			f("sysctls", keyed(&node{kind: kObject, required: []string{"name"}, fields: []field{
				f("name", str("net.core.somaxconn", "kernel.shm_rmid_forced")),
				f("value", str("1024", "1")),
			}}, "name")),
		)),
		f("serviceAccountName", str("default", "builder", "")),
		f("priorityClassName", str("high", "low")),
		f("priority", integer(0, 1000, -5)),
		f("hostNetwork", boolean()),
		f("terminationGracePeriodSeconds", integer(0, 30, 600)),
		f("dnsConfig", obj(
			f("nameservers", set(str("1.1.1.1", "8.8.8.8"))),
			f("searches", set(str("svc.cluster.local", "example.com"))),
			f("options", keyed(&node{kind: kObject, required: []string{"name"}, fields: []field{
				f("name", str("ndots", "timeout")),
				f("value", str("2", "5")),
			}}, "name")),
		)),
		f("imagePullSecrets", keyed(&node{kind: kObject, required: []string{"name"}, fields: []field{
			f("name", str("regcred", "other")),
		}}, "name")),
		f("volumes", keyed(&node{kind: kObject, required: []string{"name"}, fields: []field{
			f("name", str("data", "cache", "tmp")),
			f("emptyDir", obj(f("medium", str("", "Memory")))),
		}}, "name")),
		f("hostAliases", keyed(&node{kind: kObject, required: []string{"ip"}, fields: []field{
			f("ip", str("127.0.0.1", "10.0.0.1")),
			f("hostnames", set(str("foo.local", "bar"))),
		}}, "ip")),
	)

	// The spec of each kind the generator targets (what Assign, ModifySet and AssignImage locations
	// walk); metadata is AssignMetadata's.
	podRoot = obj(f("spec", podSpec))

	deploymentRoot = obj(f("spec", obj(
		f("replicas", integer(0, 1, 3)),
		f("minReadySeconds", integer(0, 10)),
		f("paused", boolean()),
		f("strategy", obj(f("type", str("RollingUpdate", "Recreate")))),
		f("template", obj(
			f("metadata", obj(
				f("labels", strMap(LabelKeys, str(LabelValues...))),
				f("annotations", strMap(AnnotationKeys, str(freeStrings...))),
			)),
			f("spec", podSpec),
		)),
	)))

	namespaceRoot = obj(f("spec", obj(
		f("finalizers", set(str("kubernetes", "example.com/f"))),
	)))
)

// target is a kind mutators apply to, with the part of its schema they may write.
type target struct {
	group, version, kind string
	root                 *node
	namespaced           bool
}

var (
	podTarget        = target{"", "v1", "Pod", podRoot, true}
	deploymentTarget = target{"apps", "v1", "Deployment", deploymentRoot, true}
	namespaceTarget  = target{"", "v1", "Namespace", namespaceRoot, false}
)
