package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/quiet"
	"github.com/mapc-dev/mapc/suite"
	"github.com/mapc-dev/mapc/verify"
)

type evalFlags struct {
	policies    []string
	files       []string
	namespaces  []string
	crds        []string
	params      []string
	operation   string
	oldObjects  []string
	user        string
	output      formatFlag
	kubeVersion string
}

func newEvalCmd() *cobra.Command {
	f := &evalFlags{}
	c := &cobra.Command{
		Use:   "eval --policies PATH -f OBJECTS [flags]",
		Short: "Admit objects through ready MutatingAdmissionPolicies, as the API server would, and print the result",
		Long: `eval reads MutatingAdmissionPolicies and their bindings (admissionregistration.k8s.io v1, v1beta1
or v1alpha1), checks each as the API server would when it is created (required fields, enums,
rules, every CEL expression compiled in the strict environment of --kubernetes-version), then
admits every object through the API server's own MutatingAdmissionPolicy code, policies in order
of name, and prints the admitted objects.

A policy the API server would reject is listed as file:line: name: field: problem and nothing is
admitted (exit 1). A policy without a binding, which silently never runs, and a binding naming no
policy are warned about. An object the policies deny is reported on stderr and makes the exit
status 1; the other objects are still printed.

Namespace objects among -f and --namespaces give namespaceSelector its labels; those among -f
are admitted too. An object in a namespace not given is an error (exit 1) when a namespaceSelector
of a policy or binding that applies to it looks at labels other than kubernetes.io/metadata.name;
otherwise the namespace is taken to have only that label, and a warning names the namespaces
taken as not labelled admission.gatekeeper.sh/ignore and those whose labels the policies'
expressions read.

A policy with spec.paramKind reads, through each binding's spec.paramRef, the param objects given
with --params (ConfigMaps, custom resources, ...; a custom kind needs its CRD with --crd), and the
API server's own code resolves the paramRef: by name or selector, in paramRef.namespace or else
the request's namespace, one evaluation per param found, parameterNotFoundAction Allow or Deny.
Params are not taken from -f: an object among -f is a request being admitted, which does not
exist yet, while a param exists in the cluster before the request; give an object both ways to
have both. A param of a kind no policy names in paramKind is warned about.

A failing expression that failurePolicy Ignore skips (the API server admits the object without
that mutation, and tells nobody) is warned about, naming the policy, the mutation or match
condition, the object and the error.`,
		Example: `  mapc compile examples/gatekeeper > policies.yaml
  mapc eval --policies policies.yaml -f examples/objects/pod-default-nginx-basic.yaml
  mapc eval --policies deploy/policies -f pod.yaml --namespaces namespaces.yaml --user alice
  mapc eval --policies policies.yaml -f new.yaml --old-object old.yaml --operation UPDATE -o json
  mapc eval --policies examples/params/sidecar/policy.yaml -f examples/params/sidecar/pods.yaml \
    --params examples/params/sidecar/sidecar.yaml --crd examples/params/sidecar/crd.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runEval(cmd, f) },
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.policies, "policies", nil, "MutatingAdmissionPolicy and binding file or directory, or - for stdin; repeatable")
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "objects to admit: file, directory or - for stdin; repeatable")
	fl.StringArrayVar(&f.namespaces, "namespaces", nil, "Namespace objects (labels for namespaceSelector); repeatable")
	fl.StringArrayVar(&f.crds, "crd", nil, "CustomResourceDefinition file giving the schema of custom resources (and of custom param kinds); repeatable")
	fl.StringArrayVar(&f.params, "params", nil, "param objects policies with a paramKind read (file or directory); repeatable")
	fl.StringVar(&f.operation, "operation", "", "CREATE or UPDATE (default CREATE, or UPDATE with --old-object)")
	fl.StringArrayVar(&f.oldObjects, "old-object", nil, "the objects before the UPDATE, matched to -f objects by kind, namespace and name; repeatable (without it an UPDATE's old object is the object itself)")
	fl.StringVar(&f.user, "user", "mapc", "user name of the request (request.userInfo.username)")
	addFormatFlag(fl, &f.output, "yaml", "yaml", "json")
	fl.StringVar(&f.kubeVersion, "kubernetes-version", compiler.DefaultKubernetesVersion, "Kubernetes version whose create-time checks and CEL environment apply")
	return c
}

func runEval(cmd *cobra.Command, f *evalFlags) error {
	quiet.Klog()
	stderr := cmd.ErrOrStderr()
	if len(f.policies) == 0 {
		return usageErr("eval needs --policies PATH")
	}
	if len(f.files) == 0 {
		return usageErr("eval needs at least one -f PATH of objects to admit")
	}
	if err := f.output.check("eval"); err != nil {
		return err
	}
	op, err := parseOperation(f.operation, len(f.oldObjects) > 0)
	if err != nil {
		return err
	}
	kv, err := compiler.ParseVersion(f.kubeVersion)
	if err != nil {
		return usageErr("%v", err)
	}
	if countStdin(f.policies, f.files, f.namespaces, f.crds, f.params, f.oldObjects) > 1 {
		return usageErr("only one of --policies, -f, --namespaces, --crd, --params, --old-object can read standard input")
	}

	ps, err := readPolicies(cmd, f.policies, kv)
	if err != nil {
		return err
	}
	docs, err := source.ReadPaths(f.files, cmd.InOrStdin())
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	var objects []*source.Document
	for _, d := range docs {
		if suite.IsPolicy(d.Object) {
			fmt.Fprintf(stderr, "warning: %s:%d: %s is a policy; give policies with --policies (not admitted)\n", d.File, d.Line, suite.Identity(d.Object))
			continue
		}
		objects = append(objects, d)
	}
	if len(objects) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("no objects to admit in %s", strings.Join(f.files, ", "))}
	}
	if err := source.CheckObjects(objects); err != nil {
		return &exitError{code: 1, err: err}
	}
	nss, err := readNamespaces(cmd, f.namespaces, docs)
	if err != nil {
		return err
	}
	crds, err := readCRDs(cmd, f.crds)
	if err != nil {
		return err
	}
	params, err := readParams(cmd, f.params, ps.Sets)
	if err != nil {
		return err
	}
	var olds []*unstructured.Unstructured
	if len(f.oldObjects) > 0 {
		oldDocs, err := source.ReadPaths(f.oldObjects, cmd.InOrStdin())
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		for _, d := range oldDocs {
			olds = append(olds, d.Object)
		}
	}

	ev, err := admission.New(admission.Options{Namespaces: nss, CRDs: crds, Params: suite.ParamObjects(params),
		GiveNamespacesWith: giveNamespacesWith, GiveCRDsWith: giveCRDsWith})
	if err != nil {
		return &exitError{code: 1, err: suite.PositionParamError(err, params, "--params")}
	}
	defer ev.Close()
	ctx := context.Background()
	var admitted []*unstructured.Unstructured
	denied, unknownNS := 0, 0
	notes := &admission.Trace{} // what was assumed of namespaces not given, over all objects
	for _, d := range objects {
		req := admission.Request{Object: d.Object, Operation: op, UserName: f.user}
		if op == admissionv1.Update {
			req.OldObject = d.Object
			if len(olds) > 0 {
				old, err := suite.Pick(d.Object, olds)
				if err != nil {
					return &exitError{code: 1, err: fmt.Errorf("%s:%d: %s: --old-object: %v", d.File, d.Line, suite.Identity(d.Object), err)}
				}
				req.OldObject = old
			}
		}
		tr := &admission.Trace{}
		got, err := ev.Admit(admission.WithTrace(ctx, tr), ps.Sets, req)
		var nerr *admission.NamespaceNotGivenError
		switch {
		case errors.As(err, &nerr):
			unknownNS++
			fmt.Fprintf(stderr, "%s:%d: %s: %v\n", d.File, d.Line, suite.Identity(d.Object), err)
			continue
		case err != nil:
			denied++
			fmt.Fprintf(stderr, "denied: %s:%d: %s: %v\n", d.File, d.Line, suite.Identity(d.Object), err)
			continue
		}
		for _, f := range tr.Ignored() {
			fmt.Fprintf(stderr, "warning: %s:%d: %s: %s\n", d.File, d.Line, suite.Identity(d.Object), f)
		}
		notes.Merge(tr)
		if n, err := verify.Normalize(got); err == nil {
			got = n
		}
		admitted = append(admitted, got)
	}
	for _, w := range suite.NamespaceWarnings(notes.AssumedNamespaces(), notes.NamespaceReads(), giveNamespacesWith) {
		fmt.Fprintln(stderr, w)
	}
	if err := printObjects(cmd.OutOrStdout(), admitted, f.output.value); err != nil {
		return &exitError{code: 1, err: err}
	}
	var problems []string
	if denied > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d object(s) denied", denied, len(objects)))
	}
	if unknownNS > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d object(s) not admitted: their namespace's labels matter and it is not given", unknownNS, len(objects)))
	}
	if len(problems) > 0 {
		return &exitError{code: 1, err: errors.New(strings.Join(problems, "; "))}
	}
	return nil
}

// giveNamespacesWith is how eval and verify take Namespace objects, for messages.
const giveNamespacesWith = "with --namespaces or -f"

// readPolicies reads and checks ready policies, printing warnings; problems are an exit-1 error.
func readPolicies(cmd *cobra.Command, paths []string, kv *version.Version) (*suite.Policies, error) {
	stderr := cmd.ErrOrStderr()
	docs, err := source.ReadPaths(paths, cmd.InOrStdin())
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	for _, d := range docs {
		if suite.IsPolicy(d.Object) || d.Object.GroupVersionKind().Group == "kustomize.config.k8s.io" {
			continue
		}
		fmt.Fprintf(stderr, "warning: %s:%d: %s %s is not a MutatingAdmissionPolicy or binding; ignored\n", d.File, d.Line, d.Object.GetAPIVersion(), suite.Identity(d.Object))
	}
	ps := suite.ReadPolicies(docs, kv)
	for _, w := range ps.Warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if len(ps.Problems) > 0 {
		for _, p := range ps.Problems {
			fmt.Fprintln(stderr, p.Error())
		}
		return nil, &exitError{code: 1, err: fmt.Errorf("%d problem(s): Kubernetes %s would reject these policies", len(ps.Problems), kv)}
	}
	if len(ps.Sets) == 0 {
		return nil, &exitError{code: 1, err: fmt.Errorf("no MutatingAdmissionPolicy in %s", strings.Join(paths, ", "))}
	}
	return ps, nil
}

// readNamespaces decodes the Namespace objects of the files and of docs.
func readNamespaces(cmd *cobra.Command, paths []string, docs []*source.Document) ([]*corev1.Namespace, error) {
	var all []*source.Document
	if len(paths) > 0 {
		nsDocs, err := source.ReadPaths(paths, cmd.InOrStdin())
		if err != nil {
			return nil, &exitError{code: 1, err: err}
		}
		for _, d := range nsDocs {
			if !suite.IsNamespace(d.Object) {
				return nil, &exitError{code: 1, err: fmt.Errorf("%s:%d: --namespaces: %s %s is not a v1 Namespace", d.File, d.Line, d.Object.GetAPIVersion(), d.Object.GetKind())}
			}
		}
		all = append(all, nsDocs...)
	}
	all = append(all, docs...)
	nss, err := suite.Namespaces(all)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	return nss, nil
}

func readCRDs(cmd *cobra.Command, paths []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	docs, err := source.ReadPaths(paths, cmd.InOrStdin())
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	crds, err := suite.CRDs(docs)
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("--crd: %w", err)}
	}
	return crds, nil
}

// giveCRDsWith is how eval and verify take CustomResourceDefinitions, for messages.
const giveCRDsWith = "with --crd"

// readParams reads the param objects of --params, each path holding at least one, and warns of
// those of a kind no policy of sets names in its paramKind.
func readParams(cmd *cobra.Command, paths []string, sets []admission.PolicySet) ([]*source.Document, error) {
	var docs []*source.Document
	for _, p := range paths {
		ds, err := source.ReadPaths([]string{p}, cmd.InOrStdin())
		if err != nil {
			return nil, &exitError{code: 1, err: err}
		}
		if len(ds) == 0 {
			return nil, &exitError{code: 1, err: fmt.Errorf("%s: --params: no object in it; give the param objects (ConfigMaps, custom resources) the policies' paramKind names", p)}
		}
		for _, d := range ds {
			switch {
			case suite.IsCRD(d.Object):
				return nil, &exitError{code: 1, err: fmt.Errorf("%s:%d: %s: --params: a CustomResourceDefinition is not a param; give it %s", d.File, d.Line, suite.Identity(d.Object), giveCRDsWith)}
			case d.Object.GetKind() == "" || d.Object.GetAPIVersion() == "":
				return nil, &exitError{code: 1, err: fmt.Errorf("%s:%d: --params: the object has no apiVersion or kind", d.File, d.Line)}
			case d.Object.GetName() == "":
				return nil, &exitError{code: 1, err: fmt.Errorf("%s:%d: %s: --params: no metadata.name; paramRef finds params by name or labels, and the API server stores none without a name", d.File, d.Line, d.Object.GetKind())}
			}
		}
		docs = append(docs, ds...)
	}
	for _, w := range suite.UnreadParams(docs, sets, "--params") {
		fmt.Fprintln(cmd.ErrOrStderr(), w)
	}
	return docs, nil
}

func parseOperation(s string, hasOld bool) (admissionv1.Operation, error) {
	switch strings.ToUpper(s) {
	case "":
		if hasOld {
			return admissionv1.Update, nil
		}
		return admissionv1.Create, nil
	case "CREATE":
		if hasOld {
			return "", usageErr("--old-object is for --operation UPDATE")
		}
		return admissionv1.Create, nil
	case "UPDATE":
		return admissionv1.Update, nil
	}
	return "", usageErr("--operation %q: use CREATE or UPDATE (MutatingAdmissionPolicies do not run on DELETE or CONNECT)", s)
}

func countStdin(lists ...[]string) int {
	n := 0
	for _, l := range lists {
		for _, p := range l {
			if p == "-" {
				n++
				break
			}
		}
	}
	return n
}

// printObjects writes objects as a YAML stream, or as JSON: the object, or a List of several.
func printObjects(w io.Writer, objs []*unstructured.Unstructured, format string) error {
	if format == "json" {
		var v any
		if len(objs) == 1 {
			v = objs[0].Object
		} else {
			items := make([]any, len(objs))
			for i, o := range objs {
				items[i] = o.Object
			}
			v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		}
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	for i, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}
