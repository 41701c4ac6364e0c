package lower

import (
	"slices"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// types is a set of JSON types: those a value can have when the rule runs.
type types uint8

const (
	tNull   types = 1 << iota
	tBool         // true, false
	tInt          // an integral number (a CEL int)
	tDouble       // a number that may not be integral (a CEL double)
	tStr          // a string
	tList         // an array
	tMap          // an object
	tAny    = tNull | tBool | tInt | tDouble | tStr | tList | tMap
)

// only reports whether every type of t is one of u.
func (t types) only(u types) bool { return t&^u == 0 }

// Shape is what the Kubernetes schema of the kinds a rule applies to says of one place in their
// objects: the JSON types a value there has. Kyverno's variables read objects as the API server
// sends them, and the API server keeps built-in objects to their schema: a field the schema
// types as an object holds an object (or is absent), never a string or null. The lowering reads
// a path's steps without run-time type tests where the shape says so, and with them elsewhere.
// The zero Shape knows nothing (every type possible).
type Shape struct {
	at []*openapi.ResourceSchema // one per kind; empty: unknown
	// anyObject: an object of any kind, whose metadata is an ObjectMeta (the API server keeps
	// every object's metadata to ObjectMeta's schema, custom resources' included).
	anyObject bool
	// trail: the last steps to here from the object, in a known schema ("[]" for an item).
	trail [3]string
	// dnsNamed: the object is of kinds whose names the API server validates as DNS subdomains.
	dnsNamed bool
}

// dnsNamedKinds: built-in kinds whose names the API server validates as DNS subdomains or
// labels, by group (others, such as RBAC's, allow any path segment).
var dnsNamedKinds = map[string][]string{
	"":      {"Pod", "ConfigMap", "Secret", "Service", "ServiceAccount", "Namespace", "ReplicationController"},
	"apps":  {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet"},
	"batch": {"Job", "CronJob"},
}

// dnsLabelNamed: lists of a Pod's spec whose items' names the API server validates as DNS labels.
var dnsLabelNamed = map[string]bool{"containers": true, "initContainers": true, "ephemeralContainers": true, "volumes": true, "volumeMounts": true}

// step is s's trail followed by one more step.
func (s Shape) step(name string) [3]string {
	return [3]string{s.trail[1], s.trail[2], name}
}

// tame says what the API server's validation makes of the characters of a string here: the
// object's namespace and name (of dnsNamedKinds), a label's value ([A-Za-z0-9._-]) and the name
// of a container, a volume or a volume mount (DNS labels) are tame in every object it stores
// (see tameness); so is a container's image in every Pod that can run.
func (s Shape) tame() tameness {
	if len(s.at) == 0 {
		return tameNo
	}
	switch t := s.trail; {
	case t == [3]string{"", "metadata", "namespace"}, t == [3]string{"", "metadata", "name"} && s.dnsNamed:
		return tameShape
	case t[0] == "metadata" && t[1] == "labels":
		return tameShape
	case dnsLabelNamed[t[0]] && t[1] == "[]" && t[2] == "name":
		return tameShape
	case (t[0] == "containers" || t[0] == "initContainers" || t[0] == "ephemeralContainers") && t[1] == "[]" && t[2] == "image":
		// Not validated, but an image reference's grammar has none of the other characters:
		// no registry serves an image named with them.
		return tameShape
	}
	return tameNo
}

// AnyObjectShape is the shape of an object of any kind: what its metadata holds is known.
func AnyObjectShape() Shape { return Shape{anyObject: true} }

// objectMetaShape is ObjectMeta's shape, as every kind's metadata.
func objectMetaShape() Shape {
	return ObjectShape(Kind{Version: "v1", Kind: "ConfigMap"}).field("metadata")
}

// ObjectShape is the shape of the objects of the kinds (group, version, kind each), from kyaml's
// embedded Kubernetes schema, the one Kyverno's strategic merge reads. A kind it does not know
// (a custom resource) makes the shape unknown.
func ObjectShape(kinds ...Kind) Shape {
	s := Shape{dnsNamed: len(kinds) > 0}
	for _, k := range kinds {
		s.dnsNamed = s.dnsNamed && slices.Contains(dnsNamedKinds[k.Group], k.Kind)
		apiVersion := k.Version
		if k.Group != "" {
			apiVersion = k.Group + "/" + k.Version
		}
		rs := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: k.Kind})
		if rs == nil || rs.Schema == nil {
			return Shape{}
		}
		s.at = append(s.at, rs)
	}
	return s
}

// types is the union of the types the schemas allow here.
func (s Shape) types() types {
	if s.anyObject {
		return tMap
	}
	if len(s.at) == 0 {
		return tAny
	}
	var t types
	for _, rs := range s.at {
		t |= schemaTypes(rs)
	}
	return t
}

func schemaTypes(rs *openapi.ResourceSchema) types {
	sc := rs.Schema
	if v, ok := sc.Extensions["x-kubernetes-int-or-string"]; ok && v == true {
		return tInt | tStr
	}
	if len(sc.Type) != 1 {
		return tAny
	}
	switch sc.Type[0] {
	case "object":
		if v, ok := sc.Extensions["x-kubernetes-preserve-unknown-fields"]; ok && v == true {
			return tAny
		}
		return tMap
	case "array":
		return tList
	case "string":
		if sc.Format == "int-or-string" {
			return tInt | tStr
		}
		return tStr
	case "integer":
		return tInt
	case "number":
		return tInt | tDouble
	case "boolean":
		return tBool
	}
	return tAny
}

// field is the shape of the field name of an object here.
func (s Shape) field(name string) Shape {
	if s.anyObject {
		if name == "metadata" {
			return objectMetaShape()
		}
		return Shape{}
	}
	var out Shape
	for _, rs := range s.at {
		f := rs.Field(name)
		if f == nil || f.Schema == nil {
			return Shape{}
		}
		out.at = append(out.at, f)
	}
	out.trail, out.dnsNamed = s.step(name), s.dnsNamed
	return out
}

// item is the shape of the items of an array here.
func (s Shape) item() Shape {
	var out Shape
	for _, rs := range s.at {
		if schemaTypes(rs) != tList {
			return Shape{}
		}
		e := rs.Elements()
		if e == nil || e.Schema == nil {
			return Shape{}
		}
		out.at = append(out.at, e)
	}
	out.trail, out.dnsNamed = s.step("[]"), s.dnsNamed
	return out
}

// values is the shape of the values of a map here (an object whose schema gives only the type of
// its values, as labels'); unknown for an object with named fields.
func (s Shape) values() Shape {
	var out Shape
	for _, rs := range s.at {
		if rs.Schema == nil || len(rs.Schema.Properties) > 0 || rs.Schema.AdditionalProperties == nil {
			return Shape{}
		}
		v := rs.Field("")
		if v == nil || v.Schema == nil {
			return Shape{}
		}
		out.at = append(out.at, v)
	}
	out.trail = s.step("{}")
	return out
}
