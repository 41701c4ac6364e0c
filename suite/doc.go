// Package suite reads and runs test suites for MutatingAdmissionPolicies (`mapc test`), and
// reads ready policies as the API server would accept them (`mapc eval`, `mapc verify
// --policies`).
//
// # Ready policies
//
// ReadPolicies takes MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding documents of
// admissionregistration.k8s.io v1, v1beta1 or v1alpha1, converts them to v1 through JSON (the
// three versions have the same fields; unknown fields are reported), applies the defaults the API
// server applies on create and checks them as the API server checks a new object: required fields,
// enums, rules and selectors, paramKind and paramRef, and every CEL expression (match conditions, variables, mutations)
// compiled by k8s.io/apiserver's compiler in the strict environment for new expressions of the
// target Kubernetes version, variables composed as the API server composes them. That validation
// lives in k8s.io/kubernetes, which cannot be imported: check.go re-implements the part of it that
// concerns these fields, and says what it leaves out. Problems are "file:line: Kind/name: field:
// message". A policy without a binding (it silently never runs), a binding that names no
// policy, a paramRef its policy ignores (no paramKind) and a binding without paramRef for a
// policy with paramKind (it runs with params null; the API server accepts it) are warnings.
//
// # Suite files
//
// A suite file in mapc's own format:
//
//	apiVersion: mapc.dev/v1alpha1
//	kind: Test
//	metadata:
//	  name: my-policies             # optional; the file name otherwise
//	kubernetesVersion: "1.34"       # optional, default that of `mapc compile`
//	sources:                        # files or directories, relative to the suite file
//	- ../mutators                   #   Gatekeeper mutators, Kyverno policies: compiled as `mapc compile` does
//	- policies.yaml                 #   ready MutatingAdmissionPolicies and bindings: checked
//	namespaces:                     # Namespace objects: files, or written inline
//	- namespaces.yaml
//	- {apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {env: prod}}}
//	crds: [crds.yaml]               # CustomResourceDefinitions: schemas of custom resources
//	params:                         # param objects policies with a paramKind read: files, or
//	- params.yaml                   #   written inline
//	- {apiVersion: v1, kind: ConfigMap, metadata: {name: team, namespace: shop}, data: {team: a}}
//	user: alice                     # optional: request.userInfo.username of every case
//	cases:
//	- name: a Pod gets the label    # optional; the object's Kind/namespace/name otherwise
//	  object: pod.yaml              # a file holding one object, or the object inline
//	  operation: UPDATE             # CREATE (default) or UPDATE
//	  oldObject: old-pod.yaml       # for UPDATE; the object itself if not given
//	  user: bob                     # optional, overrides the suite's user
//	  policies: [only-this-one]     # optional: run only these policies (by name)
//	  expect: expected-pod.yaml     # exactly one of expect (file or inline),
//	  # expectUnchanged: true       #   expectUnchanged,
//	  # expectError: "denied"       #   expectError (a substring of the error; "" for any)
//
// A file given to expect may hold several objects: the one with the case object's kind,
// namespace and name is used. The file is read strictly: a misspelt field is an error.
//
// Each case is admitted through the API server's own MutatingAdmissionPolicy code (package
// cel/admission) in every order of the policies it runs with (all orders up to 24, else sorted,
// reversed and 6 seeded shuffles), since the API server's order is arbitrary: an expectation must
// hold in all of them. Objects, expected objects and results are compared as the API server
// stores them (decoded into their Go types and encoded again, so e.g. "status: {}" need not be
// written); an expected object without a namespace, for an object without one, is in the
// namespace the request goes to (default).
//
// Params are served to the API server's own param code (admission.Options.Params): policies
// with a paramKind read them through their bindings' paramRef. A param of a kind no policy names
// in paramKind is warned about (UnreadParams); one the evaluator refuses (a custom kind without
// its CRD, a param given twice) makes the suite fail, pointing at it (PositionParamError).
//
// A namespace an object names but that the suite does not give is taken to have only its
// kubernetes.io/metadata.name label, unless a namespaceSelector of a policy, binding or mutator
// (among the sources) that applies to the object looks at other labels: then the case fails,
// asking for the Namespace object. The outcome's warnings list the namespaces taken as not
// labelled admission.gatekeeper.sh/ignore (mapc's bindings require that), and the reads of
// namespaces not given by the policies' expressions; a failing expression that failurePolicy
// Ignore skipped is kept in the case's result (verify.Result.Ignored) and noted in the report.
//
// # Other formats
//
// Load also reads, as far as they map onto MutatingAdmissionPolicies:
//
//   - kaptest manifests (github.com/pfnet/kaptest; recognised by mapTestSuites or
//     vapTestSuites): policies, resources and crds files; for each mapTestSuites entry, the policy
//     alone, with the named binding or, without one, a binding matching everything (as kaptest
//     evaluates it); object/oldObject/expectObject name resources by kind, name and optionally
//     namespace, group and version; expect mutate (compared with expectObject, renamed to the
//     object's name unless disableNameOverwrite), skip (unchanged), admit (no error), error or deny
//     (any error); userInfo.name; param (name, namespace): the resource of the policy's
//     paramKind is served as a param and the case's bindings get a paramRef naming exactly it
//     (Case.Param), as kaptest gives the param to the policy directly. Skipped: DELETE tests
//     (only oldObject), vapTestSuites. Ignored: userInfo groups and extra, schemaLocations, a
//     param for a policy without paramKind.
//   - kyverno-test.yaml (the Kyverno CLI; apiVersion cli.kyverno.io/v1alpha1, kyverno.io/v1 or
//     kyverno.io/v1alpha1, kind Test): policies and resources files; each result's resources (or
//     resource), found by name ("namespace/name" allowed), kind and namespace; the operation of
//     the result, else request.operation of the values file (CREATE, UPDATE with the object as
//     its old object, as kyverno test sends it; DELETE skipped); the values file's
//     namespaceSelector and namespaces give namespaces their labels. A result for a
//     MutatingAdmissionPolicy among the policies: pass with patchedResources (the patched object
//     with the same kind, namespace and name), pass without (no error), skip (unchanged), fail
//     or error (any error); the policy runs with its bindings, or with a binding matching
//     everything if it has none. A result for a Kyverno ClusterPolicy or Policy ("name" or
//     "namespace/name") runs through the policy compiled from it (kyverno.go, kyvernorun.go),
//     after the policies compiled from the Kyverno policies listed before it, each alone and in
//     that order, as kyverno test applies them; its patched resource is the one with the
//     object's apiVersion, kind, namespace and name, compared as kyverno test compares (nulls,
//     empty maps and lists removed on both sides); pass means the policy changes the object,
//     skip that it leaves it unchanged, fail and error that it fails. What the object cannot
//     tell is skipped with the reason: pass for an unchanged object (Kyverno's skip, or no rule
//     matching), a rule's result in a policy of several mutate rules (unless a patched resource
//     checks them all), rules that are not mutate rules. A Kyverno policy the compiler refuses
//     fails the suite with its problems; values of variables, userinfo and exceptions are
//     refused with Kyverno policies (the compiled policies read the request as the API server
//     sends it), and ignored (noted) without. Skipped: results for other policy kinds. Ignored:
//     checks, context.
//
// Unlike kaptest and the Kyverno CLI, mapc applies matchConstraints, the binding's match
// resources, the real schemas and the create-time checks: a policy those tools accept but the API
// server would reject fails the suite.
package suite
