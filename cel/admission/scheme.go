package admission

import (
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// clusterScopedKinds lists the built-in kinds (by group and kind) that are
// cluster-scoped in the Kubernetes API. Everything else known to the
// client-go scheme is treated as namespaced.
var clusterScopedKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}:                                                    true,
	{Group: "", Kind: "Node"}:                                                         true,
	{Group: "", Kind: "PersistentVolume"}:                                             true,
	{Group: "", Kind: "ComponentStatus"}:                                              true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                             true,
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:                       true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                      true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                  true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:                   true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                      true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:                               true,
}

// newScheme returns a private copy of the client-go scheme (all built-in
// API types) in which every type can additionally be "converted" to itself.
//
// The API server keeps admission attributes in the internal version of a
// type and converts between the internal and the versioned form around each
// mutation (admission.ConvertToGVK, the final Convert in the MAP
// dispatcher). Internal types live in k8s.io/kubernetes, which this package
// does not import, so the versioned type plays the role of the internal one
// and the conversion between them is a deep copy.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	seen := map[reflect.Type]bool{}
	for _, t := range s.AllKnownTypes() {
		if seen[t] {
			continue
		}
		seen[t] = true
		if _, ok := reflect.New(t).Interface().(runtime.Object); !ok {
			continue
		}
		if err := s.AddConversionFunc(reflect.New(t).Interface(), reflect.New(t).Interface(), identityConversion); err != nil {
			return nil, fmt.Errorf("registering identity conversion for %v: %w", t, err)
		}
	}
	return s, nil
}

func identityConversion(a, b interface{}, _ conversion.Scope) error {
	in, ok := a.(runtime.Object)
	if !ok {
		return fmt.Errorf("identity conversion: %T is not a runtime.Object", a)
	}
	reflect.ValueOf(b).Elem().Set(reflect.ValueOf(in.DeepCopyObject()).Elem())
	return nil
}

// newRESTMapper maps every built-in kind of the scheme to its resource
// (plural guessed with meta.UnsafeGuessKindToResource, which is right for
// all built-in kinds) and scope, plus the kinds of the given CRDs.
func newRESTMapper(s *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition) *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") ||
			strings.HasPrefix(t.PkgPath(), "k8s.io/apimachinery/") {
			continue
		}
		scope := meta.RESTScopeNamespace
		if clusterScopedKinds[gvk.GroupKind()] {
			scope = meta.RESTScopeRoot
		}
		m.Add(gvk, scope)
	}
	for _, crd := range crds {
		scope := meta.RESTScopeNamespace
		if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			scope = meta.RESTScopeRoot
		}
		for _, v := range crd.Spec.Versions {
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			plural := gv.WithResource(crd.Spec.Names.Plural)
			singular := gv.WithResource(crd.Spec.Names.Singular)
			if crd.Spec.Names.Singular == "" {
				singular = gv.WithResource(strings.ToLower(crd.Spec.Names.Kind))
			}
			m.AddSpecific(gv.WithKind(crd.Spec.Names.Kind), plural, singular, scope)
		}
	}
	return m
}
