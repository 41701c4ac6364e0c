package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/emit"
)

// KyvernoEngineEnv names the environment variable giving the path of the kyverno-engine program.
const KyvernoEngineEnv = "MAPC_KYVERNO_ENGINE"

// kyvernoEngineName is the program's name, next to mapc's executable or in PATH.
const kyvernoEngineName = "kyverno-engine"

// FindKyvernoEngine finds the kyverno-engine program (Kyverno's engine, built from the module
// reference/kyverno): flag if not empty, else $MAPC_KYVERNO_ENGINE, else kyverno-engine next to
// the running executable, else in PATH.
func FindKyvernoEngine(flag string) (string, error) {
	for _, p := range []struct{ path, from string }{{flag, "--kyverno-engine"}, {os.Getenv(KyvernoEngineEnv), KyvernoEngineEnv}} {
		if p.path == "" {
			continue
		}
		if _, err := os.Stat(p.path); err != nil {
			return "", fmt.Errorf("Kyverno's engine program (%s): %w; build it with `make kyverno-engine` (bin/kyverno-engine)", p.from, err)
		}
		return p.path, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), kyvernoEngineName)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(kyvernoEngineName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("Kyverno's engine program %s is not found (not given with --kyverno-engine or %s, not next to mapc, not in PATH): build it with `make kyverno-engine` (bin/%s)", kyvernoEngineName, KyvernoEngineEnv, kyvernoEngineName)
}

// KyvernoReference is Kyverno v1.19.1's engine (the kyverno-engine program of the module
// reference/kyverno, driven as Kyverno's webhooks drive it) as a Reference. The program is
// started once and serves every request until Close.
type KyvernoReference struct {
	policies []*unstructured.Unstructured
	order    []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	done   chan error
}

// kyvernoSetup and kyvernoRequest, kyvernoResponse are the program's protocol (package
// reference/kyverno: Setup, Request, Response).
type kyvernoSetup struct {
	Policies   []*unstructured.Unstructured `json:"policies"`
	Config     map[string]string            `json:"config,omitempty"`
	ConfigMaps []*unstructured.Unstructured `json:"configMaps,omitempty"`
}

type kyvernoRequest struct {
	Object      *unstructured.Unstructured `json:"object,omitempty"`
	OldObject   *unstructured.Unstructured `json:"oldObject,omitempty"`
	Operation   admissionv1.Operation      `json:"operation,omitempty"`
	SubResource string                     `json:"subResource,omitempty"`
	Namespace   *corev1.Namespace          `json:"namespace,omitempty"`
	UserInfo    *authenticationv1.UserInfo `json:"userInfo,omitempty"`
	Order       []string                   `json:"order,omitempty"`
}

// kyvernoUser is who sends a request without a RefRequest.User: the user the policies' evaluator (cel/admission)
// admits as, so that both sides match subjects alike.
var kyvernoUser = &authenticationv1.UserInfo{Username: "mapc", Groups: []string{"system:authenticated"}}

type kyvernoResponse struct {
	Ready  bool                       `json:"ready,omitempty"`
	Object *unstructured.Unstructured `json:"object,omitempty"`
	Denied string                     `json:"denied,omitempty"`
	Error  string                     `json:"error,omitempty"`
}

// NewKyvernoReference starts the program at path (see FindKyvernoEngine) with the Kyverno
// policies (ClusterPolicy, Policy), which Kyverno applies in the order given (its own order is
// arbitrary). Kyverno's configuration is its default: no resource filters, no excluded users.
// The ConfigMaps among params (the param objects the compiled policies read, Options.Params) are
// the cluster's ConfigMaps, which the policies' configMap context entries read.
func NewKyvernoReference(path string, policies, params []*unstructured.Unstructured) (*KyvernoReference, error) {
	return NewKyvernoReferenceWithConfig(path, policies, params, nil)
}

// NewKyvernoReferenceWithConfig is NewKyvernoReference with Kyverno's configuration: config is
// the data of Kyverno's ConfigMap (resourceFilters, excludeGroups, webhooks, ...), loaded as
// Kyverno loads it (nil: the defaults).
func NewKyvernoReferenceWithConfig(path string, policies, params []*unstructured.Unstructured, config map[string]string) (*KyvernoReference, error) {
	k := &KyvernoReference{policies: policies, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	for _, p := range policies {
		if p.GetNamespace() != "" && p.GetKind() == "Policy" {
			k.order = append(k.order, p.GetNamespace()+"/"+p.GetName())
		} else {
			k.order = append(k.order, p.GetName())
		}
	}
	k.cmd = exec.Command(path)
	k.cmd.Stderr = k.stderr
	var err error
	if k.in, err = k.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	k.out = bufio.NewReaderSize(out, 1<<20)
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("Kyverno's engine program: %w; build it with `make kyverno-engine` (bin/kyverno-engine)", err)
	}
	go func() { k.done <- k.cmd.Wait() }()
	var ready kyvernoResponse
	var cms []*unstructured.Unstructured
	for _, p := range params {
		if p != nil && p.GetAPIVersion() == "v1" && p.GetKind() == "ConfigMap" {
			cms = append(cms, p)
		}
	}
	if err := k.exchange(kyvernoSetup{Policies: policies, Config: config, ConfigMaps: cms}, &ready); err != nil {
		k.Close()
		return nil, err
	}
	if !ready.Ready {
		k.Close()
		return nil, fmt.Errorf("Kyverno's engine: %s", ready.Error)
	}
	return k, nil
}

// exchange sends one line and reads the answer.
func (k *KyvernoReference) exchange(msg, answer any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := k.in.Write(append(data, '\n')); err != nil {
		return k.failed(err)
	}
	line, err := k.out.ReadBytes('\n')
	if err != nil {
		return k.failed(err)
	}
	return json.Unmarshal(line, answer)
}

// failed is err with what the program said on its way out.
func (k *KyvernoReference) failed(err error) error {
	if s := strings.TrimSpace(k.stderr.String()); s != "" {
		return fmt.Errorf("Kyverno's engine program stopped: %s", s)
	}
	return fmt.Errorf("Kyverno's engine program stopped: %w", err)
}

func (k *KyvernoReference) Name() string { return "Kyverno" }

// orderOf is the request's order of the policies, else the order they were given in.
func (k *KyvernoReference) orderOf(req RefRequest) []string {
	if req.Order != nil {
		return req.Order
	}
	return k.order
}

// Order names the Kyverno policies the compiled policies come from, in their order: "name" for
// a ClusterPolicy, "namespace/name" for a Policy.
func (k *KyvernoReference) Order(policies []*admissionregistrationv1.MutatingAdmissionPolicy) []string {
	var out []string
	for _, p := range policies {
		for _, s := range emit.ParseSources(p.GetAnnotations()[emit.AnnotationSource]) {
			if !strings.HasPrefix(s.APIVersion, "kyverno.io/") {
				continue
			}
			name := s.Name
			if s.Kind == "Policy" {
				name = s.Namespace + "/" + s.Name
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

func (k *KyvernoReference) Admit(_ context.Context, req RefRequest) (*unstructured.Unstructured, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var resp kyvernoResponse
	user := kyvernoUser
	if req.User != "" {
		user = &authenticationv1.UserInfo{Username: req.User, Groups: kyvernoUser.Groups}
	}
	err := k.exchange(kyvernoRequest{Object: req.Object, OldObject: req.OldObject, Operation: req.Operation, SubResource: req.SubResource, UserInfo: user,
		Namespace: req.Namespace, Order: k.orderOf(req)}, &resp)
	switch {
	case err != nil:
		return nil, err
	case resp.Error != "":
		return nil, fmt.Errorf("Kyverno's engine: %s", resp.Error)
	case resp.Denied != "":
		return nil, errors.New(resp.Denied)
	case resp.Object == nil:
		return req.Object, nil
	}
	return resp.Object, nil
}

// KyvernoCases are the requests obj is admitted with to verify Kyverno policies, whose rules run
// on every request Kyverno's webhook is called for: obj created; updated with no change (obj as
// its own old object: the rules run again, on an object they may have mutated before); and, for
// a Pod, kubectl debug's update of pods/ephemeralcontainers adding a container (see Debug). A
// Namespace is created only (the update of a namespace is a request on the namespace itself).
func KyvernoCases(obj *unstructured.Unstructured) []Case {
	cs := []Case{{Object: obj}}
	if obj.GetAPIVersion() == "v1" && obj.GetKind() == "Namespace" {
		return cs
	}
	cs = append(cs, Case{Name: "UPDATE " + caseName(obj), Object: obj, OldObject: obj, Operation: admissionv1.Update})
	if c, ok := DebugCase(obj); ok {
		cs = append(cs, c)
	}
	return cs
}

// DebugCase is kubectl debug's request for a Pod (v1): an UPDATE of pods/ephemeralcontainers
// adding a container to it (see Debug), which Kyverno's webhook, and Gatekeeper's as its Helm
// chart installs it, are called for. ok is false for other objects.
func DebugCase(obj *unstructured.Unstructured) (Case, bool) {
	debug := Debug(obj)
	if debug == nil {
		return Case{}, false
	}
	return Case{Name: "UPDATE pods/ephemeralcontainers " + caseName(obj), Object: debug, OldObject: obj, Operation: admissionv1.Update, SubResource: "ephemeralcontainers"}, true
}

// StatusCase is an UPDATE of obj's status subresource changing nothing (obj as old and new:
// a controller writing the status it read), for an object whose kind the policies' mutate rules
// name with the status subresource (Node/status); ok is false for other objects. Kyverno runs
// such rules on those requests only, and the compiled policies match them alike.
func (k *KyvernoReference) StatusCase(obj *unstructured.Unstructured) (Case, bool) {
	found := false
	k.mutateRules(obj.GetNamespace(), func(_ *unstructured.Unstructured, _ int, rule map[string]any) bool {
		for _, res := range ruleResources(rule, "match") {
			found = found || namesStatus(res, obj.GetKind())
		}
		return !found
	})
	if !found {
		return Case{}, false
	}
	return Case{Name: "UPDATE status " + caseName(obj), Object: obj, OldObject: obj, Operation: admissionv1.Update, SubResource: "status"}, true
}

// mutateRules calls f with each mutate rule (its policy and index) of the policies that apply
// in namespace ns (a namespaced Policy only in its own), until f returns false.
func (k *KyvernoReference) mutateRules(ns string, f func(p *unstructured.Unstructured, i int, rule map[string]any) bool) {
	for _, p := range k.policies {
		if p.GetKind() == "Policy" && p.GetNamespace() != ns {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
		for i, r := range rules {
			rule, _ := r.(map[string]any)
			if _, ok := rule["mutate"]; !ok {
				continue
			}
			if !f(p, i, rule) {
				return
			}
		}
	}
}

// namesStatus: do the kinds of a match block's resources name kind's status subresource
// (Kind/status, Kind.status, with or without group and version)?
func namesStatus(res map[string]any, kind string) bool {
	kinds, _ := res["kinds"].([]any)
	for _, k := range kinds {
		s, _ := k.(string)
		for _, sep := range []string{"/", "."} {
			if rest, ok := strings.CutSuffix(s, sep+"status"); ok && rest[strings.LastIndex(rest, "/")+1:] == kind {
				return true
			}
		}
	}
	return false
}

// ServiceStatusCase is an UPDATE of a Service's (v1) status changing nothing, as a controller
// writing the status it read sends (a load balancer's), which Gatekeeper's webhook, as its Helm
// chart installs it, is called for (services/status); ok is false for other objects.
func ServiceStatusCase(obj *unstructured.Unstructured) (Case, bool) {
	if obj.GetAPIVersion() != "v1" || obj.GetKind() != "Service" {
		return Case{}, false
	}
	return Case{Name: "UPDATE services/status " + caseName(obj), Object: obj, OldObject: obj, Operation: admissionv1.Update, SubResource: "status"}, true
}

// BindingCase is a scheduler's binding of a Pod (v1) that has no node yet: a CREATE of
// pods/binding carrying a Binding to the node "node-1", which Gatekeeper's webhook, as its Helm
// chart installs it, is called for; the API server copies the Binding's annotations, and its
// labels (with the PodTopologyLabelsAdmission feature), over the Pod's. ok is false for other
// objects.
func BindingCase(pod *unstructured.Unstructured) (Case, bool) {
	if pod.GetAPIVersion() != "v1" || pod.GetKind() != "Pod" {
		return Case{}, false
	}
	if node, _, _ := unstructured.NestedString(pod.Object, "spec", "nodeName"); node != "" {
		return Case{}, false
	}
	return Case{Name: "CREATE pods/binding " + caseName(pod), Object: Binding(pod, "node-1"), Operation: admissionv1.Create,
		SubResource: "binding", Resource: corev1.SchemeGroupVersion.WithResource("pods")}, true
}

// Binding is the Binding of pod to node, as the scheduler writes it.
func Binding(pod *unstructured.Unstructured, node string) *unstructured.Unstructured {
	meta := map[string]any{"name": pod.GetName()}
	if ns := pod.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	if uid := string(pod.GetUID()); uid != "" {
		meta["uid"] = uid
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Binding", "metadata": meta,
		"target": map[string]any{"apiVersion": "v1", "kind": "Node", "name": node}}}
}

// UpdateOfResult is the update with no change of the object as a passing CREATE case c left it
// (r, its result: the reference's): Kyverno's rules run again on every update of what they
// mutated, where a JSON patch that appends appends again and a merge finds its work done. ok is
// false for a case that did not pass, was denied, or is not a CREATE of the resource itself.
func UpdateOfResult(c Case, r Result) (Case, bool) {
	if !r.Pass || r.Want == nil || r.WantErr != "" || (c.Operation != "" && c.Operation != admissionv1.Create) || c.SubResource != "" {
		return Case{}, false
	}
	name := c.Name
	if name == "" {
		name = caseName(c.Object)
	}
	return Case{Name: "UPDATE " + name + ", as created", Object: r.Want, OldObject: r.Want, Operation: admissionv1.Update, User: c.User}, true
}

// NamespaceUses lists the namespaceSelectors of the policies' rules (match and exclude) whose
// kinds name obj's kind (or any kind, or Pod, which Kyverno's autogen extends to the pod
// controllers) and which look at a label other than kubernetes.io/metadata.name, and the
// apiCall context entries of the rules whose match names it (they read the request's
// namespace); a namespaced Policy counts only in its own namespace. It does not evaluate the
// rest of a rule's match, so it may name a selector or an entry that would not decide anything.
func (k *KyvernoReference) NamespaceUses(obj *unstructured.Unstructured, _ admissionv1.Operation) ([]string, bool) {
	var uses []string
	k.mutateRules(obj.GetNamespace(), func(p *unstructured.Unstructured, i int, rule map[string]any) bool {
		for _, clause := range []string{"match", "exclude"} {
			for path, res := range ruleResources(rule, clause) {
				sel, _ := res["namespaceSelector"].(map[string]any)
				if sel == nil || !kindApplies(res, obj.GetKind()) {
					continue
				}
				if keys := selectorKeys(sel); len(keys) > 0 {
					uses = append(uses, fmt.Sprintf("%s/%s: spec.rules[%d].%s.namespaceSelector on %s", p.GetKind(), p.GetName(), i, path, strings.Join(keys, ", ")))
				}
			}
		}
		// An apiCall entry reads the request's namespace (the only one mapc translates).
		applies := false
		for _, res := range ruleResources(rule, "match") {
			applies = applies || kindApplies(res, obj.GetKind())
		}
		if applies {
			for _, at := range apiCalls(rule, fmt.Sprintf("spec.rules[%d]", i)) {
				uses = append(uses, fmt.Sprintf("%s/%s: %s.apiCall reads the request's namespace", p.GetKind(), p.GetName(), at))
			}
		}
		return true
	})
	return uses, false
}

// apiCalls gives where the apiCall context entries of a rule (or a foreach entry) and of its
// foreach entries, at any depth, are written, below field.
func apiCalls(m map[string]any, field string) []string {
	var out []string
	entries, _ := m["context"].([]any)
	for j, e := range entries {
		if em, _ := e.(map[string]any); em["apiCall"] != nil {
			out = append(out, fmt.Sprintf("%s.context[%d]", field, j))
		}
	}
	at := m
	if mut, ok := m["mutate"].(map[string]any); ok {
		at, field = mut, field+".mutate"
	}
	fes, _ := at["foreach"].([]any)
	for j, fe := range fes {
		if fm, ok := fe.(map[string]any); ok {
			out = append(out, apiCalls(fm, fmt.Sprintf("%s.foreach[%d]", field, j))...)
		}
	}
	return out
}

// ruleResources gives the resource filters of a rule's match or exclude, by path.
func ruleResources(rule map[string]any, clause string) map[string]map[string]any {
	out := map[string]map[string]any{}
	c, _ := rule[clause].(map[string]any)
	if res, ok := c["resources"].(map[string]any); ok {
		out[clause+".resources"] = res
	}
	for _, list := range []string{"any", "all"} {
		filters, _ := c[list].([]any)
		for j, f := range filters {
			fm, _ := f.(map[string]any)
			if res, ok := fm["resources"].(map[string]any); ok {
				out[fmt.Sprintf("%s.%s[%d].resources", clause, list, j)] = res
			}
		}
	}
	return out
}

func kindApplies(res map[string]any, kind string) bool {
	kinds, _ := res["kinds"].([]any)
	for _, k := range kinds {
		s, _ := k.(string)
		name := s[strings.LastIndex(s, "/")+1:]
		if name == "*" || name == kind || name == "Pod" {
			return true
		}
	}
	return false
}

// selectorKeys are the label keys a selector reads, but kubernetes.io/metadata.name.
func selectorKeys(sel map[string]any) []string {
	ls := &metav1.LabelSelector{}
	data, _ := json.Marshal(sel)
	if json.Unmarshal(data, ls) != nil {
		return []string{"(an invalid selector)"}
	}
	var keys []string
	for k := range ls.MatchLabels {
		if k != corev1.LabelMetadataName {
			keys = append(keys, k)
		}
	}
	for _, e := range ls.MatchExpressions {
		if e.Key != corev1.LabelMetadataName {
			keys = append(keys, e.Key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Close stops the program: it ends at the end of its input.
func (k *KyvernoReference) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return nil
	}
	k.in.Close()
	var err error
	select {
	case err = <-k.done:
	case <-time.After(10 * time.Second):
		_ = k.cmd.Process.Kill()
		err = <-k.done
	}
	k.cmd = nil
	return err
}
