// Package admission admits objects through the Kubernetes API server's own
// MutatingAdmissionPolicy (MAP) admission code, in process, so that MAPs
// emitted by mapc can be checked by the code that will run them.
//
// # What runs for real
//
// The following is the code of k8s.io/apiserver (the version pinned in
// go.mod), not a re-implementation:
//
//   - the MAP admission plugin: mutating.Plugin around generic.Plugin
//     (readiness, excluded resources, Dispatch), built with generic.NewPlugin
//     and initialized through the same setters and ValidateInitialization
//     as in the API server;
//   - the policy source (generic.NewPolicySource over informers on the
//     admissionregistration.k8s.io/v1 MAP and binding objects) with the real
//     accessors, which compiles policies and pairs them with bindings;
//   - the dispatcher (mutating.NewDispatcher): matchConstraints and binding
//     matchResources (resource rules, namespaceSelector, objectSelector),
//     matchConditions, variables, CEL evaluation with its cost budget, the
//     JSONPatch and ApplyConfiguration patchers, failurePolicy handling and
//     the MAP reinvocation bookkeeping;
//   - the admission chain and its reinvocation wrapper, obtained from
//     admission.Plugins.NewFromPlugins (the wrapper is not exported
//     otherwise), and admission.NewAttributesRecord with its reinvocation
//     context.
//
// # Ordering and reinvocation
//
// The API server runs all MAPs inside one call of one plugin, in an order
// that comes from Go map iteration and is therefore arbitrary. To test a
// given order, the Evaluator creates one plugin instance per PolicySet
// (each instance's informers hold only that policy and its bindings) and
// chains the instances in the requested order with the real chain handler
// and reinvocation wrapper. All instances use the plugin name
// "MutatingAdmissionPolicy" for their reinvocation state in the request's
// reinvocation context, so they share it as the policies of one plugin call
// would, and the reinvocation wrapper re-runs the chain once when a policy
// asked for it: IfNeeded policies that ran before a change are re-run
// once, Never policies are not. Note that, as in the API server, an
// IfNeeded policy that itself changed the object is re-run too.
//
// Differences from one plugin call: between two policies the object is
// written back from the versioned object to the admission attributes (an
// identity conversion here) and each instance ends its call as the plugin
// would (marking reinvocation if it changed the object). For
// the MAP dispatcher's logic these steps give the same result as one call.
// The API server's chain also contains other admission plugins (built-in
// mutators such as ServiceAccount, and mutating webhooks), which do not run
// here; nor do the admission metrics decorators.
//
// # What is re-implemented or replaced
//
//   - compilePolicy is a copy of the unexported function in
//     mutating/compilation.go (it only composes exported pieces).
//   - Type converters: mutating.NewPlugin reads schemas from /openapi/v3
//     through discovery, which a fake client does not serve. The dispatcher
//     here gets a static patch.TypeConverterManager: built-in kinds use
//     applyconfigurations.NewTypeConverter over the client-go scheme;
//     custom resources use a converter built from Options.CRDs with
//     managedfields.NewTypeConverter over a condensed copy of the schema the
//     apiextensions-apiserver publishes (see crdTypeConverter). A kind that
//     is neither has no schema and every mutation of it fails, as in the API
//     server while a CRD is not yet published.
//   - Object conversion: the API server keeps the attributes object in the
//     internal version of the type. Internal types live in k8s.io/kubernetes,
//     which is not imported; the versioned Go type (client-go scheme) plays
//     the internal type and the conversion between them is a deep copy.
//     Custom resources stay unstructured, as in the API server.
//   - Defaulting: the defaulting functions of built-in types live in
//     k8s.io/kubernetes, so the object defaulter is a no-op. Objects are not
//     defaulted when decoded nor after each mutation (the API server does
//     both), so e.g. a Pod's restartPolicy or a container's
//     terminationMessagePath are not set. Custom resources are not pruned or
//     defaulted from their CRD schema either.
//   - MAP and binding objects are defaulted like the API server does on
//     create of v1 objects (failurePolicy Fail, matchPolicy Equivalent, empty
//     namespace and object selectors, rule scope "*"; not
//     parameterNotFoundAction, which v1 requires and only v1alpha1 defaults:
//     see DefaultParamRefV1alpha1); they are not validated, so e.g. a CEL compile error is reported when the
//     policy is evaluated (subject to failurePolicy) instead of rejecting the
//     policy.
//   - Namespaces: the Options.Namespaces objects get the label
//     kubernetes.io/metadata.name that the API server sets. A namespace that
//     is not listed is taken to exist with only that label, as long as no
//     namespaceSelector of a policy that applies to the request looks at its
//     other labels: then Admit refuses the request with a
//     NamespaceNotGivenError instead of guessing. The requirement
//     admission.gatekeeper.sh/ignore DoesNotExist (Gatekeeper's
//     installation, which mapc puts in every binding) is taken as met, and
//     expressions reading namespaceObject's labels read none; Trace lists
//     both (see namespaces.go). A namespaced object without metadata.namespace
//     is admitted in (and gets) namespace "default", like kubectl and the
//     API server would.
//   - Ignored failures: the API server tells a client nothing when
//     failurePolicy Ignore swallows a failing expression; the evaluator
//     records them in a Trace (see there for where they are observed).
//   - Resources: the GVR comes from a RESTMapper over the client-go scheme
//     (plural by meta.UnsafeGuessKindToResource, known cluster-scoped
//     built-in kinds) and the CRDs; an unknown kind gets the guessed plural
//     and is namespaced iff it has a namespace. The equivalent-resource
//     registry is empty, so matchPolicy Equivalent does not match other
//     versions or groups of a resource.
//   - The authorizer allows everything; the user is Request.UserName in
//     group system:authenticated.
//
// # Params
//
// Param objects (Options.Params) are resolved by the API server's own code.
// The policy source starts an informer per paramKind, through the external
// kube informer factory for a built-in kind (ConfigMap, ...) and through the
// dynamic client for a custom resource, and the dispatcher
// (generic.CollectParams) reads each binding's paramRef against it: by
// name or by selector, in paramRef.namespace or else the request's
// namespace for a namespaced kind, one evaluation per param found,
// parameterNotFoundAction Allow (the binding does not run) or Deny (the
// request fails, subject to failurePolicy), and its errors for a paramKind
// that names no kind ("failed to find resource referenced by paramKind"), a
// namespace given for a cluster-scoped kind, or a namespaced kind on a
// cluster-scoped request without paramRef.namespace. A binding without
// paramRef for a policy with paramKind runs the policy once with params
// null (the API server's validation accepts it, see suite's checks).
//
// What is served here: the param objects are stored in the fake clientset
// behind the informer factory (built-in kinds) and in the fake dynamic client
// (all kinds, with the list kinds of the CRDs registered so that the dynamic
// informer can list them), under the resource and scope of the REST mapper,
// so a CRD's plural need not be the guessed one. A custom kind needs its
// CRD in Options.CRDs, as the API server needs the CRD before the object; a
// param of a kind that is neither is refused by New. A namespaced param
// without a namespace is stored in "default" and a cluster-scoped param's
// namespace is dropped, as kubectl would create them. Param objects are not
// validated, defaulted or pruned against their schema, and get no uid,
// resourceVersion or creationTimestamp. The plugin is ready once the param
// informers have listed the params (the API server waits up to a second per
// request, then fails it as "not yet synced"), and params never change.
//
// # Results
//
// The input is decoded into its Go type (unknown fields are dropped) and the
// result is converted back, so the result contains what that round trip
// adds (e.g. "status: {}" or "resources: {}" on a Pod). Admit with no
// policy sets returns this normalized form of an object, to compare with.
//
// # Limitations
//
//   - Params are a fixed set given to New: a param created, changed or
//     deleted while the API server runs (and the informer lag after it, which
//     the API server bridges with a direct GET for names) is not modelled.
//   - Only the main resource (no subresources); DELETE is not handled by
//     the MAP plugin (as in the API server) and returns the object as is.
//   - Plugin instances (one per distinct PolicySet content) and chains (one
//     per distinct order) are cached until Close. Building an instance takes
//     a few milliseconds; a warm Admit costs tens of microseconds plus the
//     policies' evaluation.
//   - The apiserver code logs through klog (e.g. "refreshing policies" and
//     "Loaded N mutating admission controller(s)" once per new chain); the
//     program decides where klog output goes.
//   - generic.SetPolicyRefreshIntervalForTests is not needed: an instance's
//     policies never change, and the policy source compiles them right after
//     its informers synced, which Admit waits for.
package admission
