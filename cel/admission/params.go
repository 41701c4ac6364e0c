package admission

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// Params (paramKind / paramRef) are resolved by the API server's own code: the policy source
// (generic.NewPolicySource) starts an informer for each policy's paramKind, through the external
// kube informer factory for built-in kinds (a ConfigMap) and through the dynamic client for the
// others (a custom resource), and the dispatcher (generic.CollectParams) reads the binding's
// paramRef against it, falling back to a GET through the dynamic client for a name the informer
// does not hold. So the param objects are served in both places: built-in kinds by the fake
// clientset behind the informer factory and by the fake dynamic client, custom resources by the
// fake dynamic client, under the resource and scope the REST mapper gives (the CRD's plural,
// not a guessed one).

// newDynamicClient returns a fake dynamic client that knows every built-in kind of s and every
// version of the CRDs as unstructured objects, with their list kinds (the dynamic informer
// lists), as dynamicfake.NewSimpleDynamicClient does for the kinds of a scheme.
func newDynamicClient(s *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition) *dynamicfake.FakeDynamicClient {
	us := runtime.NewScheme()
	for gvk := range s.AllKnownTypes() {
		if us.Recognizes(gvk) {
			continue
		}
		if strings.HasSuffix(gvk.Kind, "List") {
			us.AddKnownTypeWithName(gvk, &unstructured.UnstructuredList{})
			continue
		}
		us.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	}
	listKinds := map[schema.GroupVersionResource]string{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			if !us.Recognizes(gv.WithKind(crd.Spec.Names.Kind)) {
				us.AddKnownTypeWithName(gv.WithKind(crd.Spec.Names.Kind), &unstructured.Unstructured{})
			}
			listKind := crd.Spec.Names.ListKind
			if listKind == "" {
				listKind = crd.Spec.Names.Kind + "List"
			}
			listKinds[gv.WithResource(crd.Spec.Names.Plural)] = listKind
		}
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(us, listKinds)
}

// ParamError is a param object New refuses: Index is its place in Options.Params.
type ParamError struct {
	Index int
	Param *unstructured.Unstructured
	Msg   string
}

func (e *ParamError) Error() string {
	if e.Param.GetKind() == "" || e.Param.GetName() == "" {
		return fmt.Sprintf("param %d: %s", e.Index, e.Msg)
	}
	return fmt.Sprintf("param %s %q: %s", e.Param.GetKind(), e.Param.GetName(), e.Msg)
}

// addParams stores the param objects where the API server's param informers and its GET
// fallback read them. A namespaced param without a namespace is stored in "default", as kubectl
// would create it; a cluster-scoped param's namespace is dropped, as kubectl drops it. A param
// of a kind that is neither built in nor one of the CRDs is an error: the API server would not
// store it.
func (e *Evaluator) addParams(params []*unstructured.Unstructured, giveCRDsWith string) error {
	seen := map[string]bool{}
	for i, p := range params {
		if p == nil {
			continue
		}
		fail := func(format string, a ...any) error {
			return &ParamError{Index: i, Param: p, Msg: fmt.Sprintf(format, a...)}
		}
		gvk := p.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return fail("no apiVersion/kind")
		}
		if p.GetName() == "" {
			return fail("%s without metadata.name", gvk.Kind)
		}
		mapping, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			give := "give its CustomResourceDefinition"
			if giveCRDsWith != "" {
				give += " " + giveCRDsWith
			}
			return fail("%s is neither a built-in kind nor a kind of the CRDs given: %s", p.GetAPIVersion()+" "+gvk.Kind, give)
		}
		if err != nil {
			return fail("%v", err)
		}
		p = p.DeepCopy()
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if p.GetNamespace() == "" {
				p.SetNamespace("default")
			}
		} else {
			p.SetNamespace("")
		}
		key := mapping.Resource.String() + " " + p.GetNamespace() + "/" + p.GetName()
		if seen[key] {
			if p.GetNamespace() != "" {
				return fail("given twice in namespace %s", p.GetNamespace())
			}
			return fail("given twice")
		}
		seen[key] = true

		if err := e.dynClient.Tracker().Create(mapping.Resource, p, p.GetNamespace()); err != nil {
			return fail("%v", err)
		}
		if !e.scheme.Recognizes(gvk) {
			continue
		}
		typed, err := e.decode(p)
		if err != nil {
			return fail("%v", err)
		}
		if err := e.kubeClient.Tracker().Create(mapping.Resource, typed, p.GetNamespace()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fail("%v", err)
		}
	}
	return nil
}

// startParamInformer registers and starts, for the lifetime of the Evaluator, the informer of
// the external kube informer factory that the policy source will pick for a built-in paramKind
// (generic.NewPolicySource starts it with the context of the plugin instance that first needs
// it, which would tie a shared informer to one instance). Kinds the factory has no informer for
// (custom resources) are left to the policy source's own dynamic informer.
func (e *Evaluator) startParamInformer(pk *admissionregistrationv1.ParamKind) {
	if pk == nil {
		return
	}
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		return
	}
	mapping, err := e.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: pk.Kind}, gv.Version)
	if err != nil {
		return
	}
	if _, err := e.kubeFactory.ForResource(mapping.Resource); err != nil {
		return
	}
	e.kubeFactory.Start(e.stop)
}

// ParamRefTo returns a paramRef that finds exactly the param object p as New stores it: by its
// name, in its namespace ("default" for a namespaced param given without one, none for a
// cluster-scoped one), with parameterNotFoundAction Deny. Tools that give a policy its param
// directly (kaptest's param) are run through a binding with this paramRef.
func (e *Evaluator) ParamRefTo(p *unstructured.Unstructured) *admissionregistrationv1.ParamRef {
	deny := admissionregistrationv1.DenyAction
	ref := &admissionregistrationv1.ParamRef{Name: p.GetName(), Namespace: p.GetNamespace(), ParameterNotFoundAction: &deny}
	gvk := p.GroupVersionKind()
	if mapping, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		switch {
		case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
			ref.Namespace = ""
		case ref.Namespace == "":
			ref.Namespace = "default"
		}
	}
	return ref
}
