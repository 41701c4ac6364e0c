package suite

import (
	"context"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/cel/admission"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"apiVersion: mapc.dev/v1alpha1\nkind: Test\n", FormatMapc},
		{"---\napiVersion: mapc.dev/v1alpha1\nkind: Test\n---\nkind: Other\n", FormatMapc},
		{"apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\n", FormatKyverno},
		{"apiVersion: kyverno.io/v1\nkind: Test\n", FormatKyverno},
		{"version: v1alpha1\nmapTestSuites: []\n", FormatKaptest},
		{"vapTestSuites: [{policy: x}]\n", FormatKaptest},
		{"apiVersion: v1\nkind: Pod\n", ""},
		{"apiVersion: mapc.dev/v1alpha1\nkind: Suite\n", ""},
		{"- a list\n", ""},
		{"{not yaml", ""},
	} {
		if got := Detect([]byte(tc.text)); got != tc.want {
			t.Errorf("Detect(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestFindAndLoadExamples(t *testing.T) {
	paths, err := Find([]string{"../testdata/suites"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"../testdata/suites/kaptest-params/kaptest.yaml",
		"../testdata/suites/kaptest/kaptest.yaml",
		"../testdata/suites/kyverno-images/kyverno-test.yaml",
		"../testdata/suites/kyverno-namespace/kyverno-test.yaml",
		"../testdata/suites/kyverno/kyverno-test.yaml",
		"../testdata/suites/mapc/examples.test.yaml",
		"../testdata/suites/mapc/handwritten.test.yaml",
	}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("Find = %q, want %q", paths, want)
	}
	cases := map[string]int{}
	for _, p := range paths {
		s, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cases[s.Format] += len(s.Cases)
		if s.Format == FormatKaptest && len(s.Params) == 0 {
			// The expected object is renamed to the object's name, as kaptest does.
			if got := s.Cases[0].Expect.GetName(); got != "base" {
				t.Errorf("kaptest expectObject name %q, want base", got)
			}
			if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0].Reason, "DELETE") {
				t.Errorf("kaptest skipped %v", s.Skipped)
			}
		}
		o := Run(context.Background(), s)
		if o.Err != nil || o.Failed() != 0 || o.Passed() != len(s.Cases) {
			var b strings.Builder
			WriteText(&b, o)
			t.Errorf("%s:\n%s", p, b.String())
		}
	}
	if want := map[string]int{FormatMapc: 12, FormatKaptest: 7, FormatKyverno: 8}; !reflect.DeepEqual(cases, want) {
		t.Errorf("cases per format %v, want %v", cases, want)
	}
}

func TestSelectSets(t *testing.T) {
	policy := func(name string, bindings ...string) admission.PolicySet {
		s := admission.PolicySet{Policy: &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		for _, b := range bindings {
			s.Bindings = append(s.Bindings, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: b}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name}})
		}
		return s
	}
	all := []admission.PolicySet{policy("a", "a1", "a2"), policy("b", "b1"), policy("c")}
	names := func(sets []admission.PolicySet) string {
		var out []string
		for _, s := range sets {
			var bs []string
			for _, b := range s.Bindings {
				bs = append(bs, b.Name)
			}
			out = append(out, s.Policy.Name+"["+strings.Join(bs, ",")+"]")
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		c    Case
		want string
		err  string
	}{
		{Case{}, "a[a1,a2] b[b1] c[]", ""},
		{Case{Policies: []string{"b", "a"}}, "b[b1] a[a1,a2]", ""},
		{Case{Policies: []string{"a"}, Binding: "a2"}, "a[a2]", ""},
		{Case{Policies: []string{"a", "c"}, OwnBinding: true}, "a[a] c[c]", ""},
		{Case{Policies: []string{"d"}}, "", `no policy is named "d"`},
		{Case{Policies: []string{"b"}, Binding: "a1"}, "", `no binding of policy b is named "a1"`},
	} {
		got, err := selectSets(&tc.c, all)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%+v: error %v, want %q", tc.c, err, tc.err)
			}
			continue
		}
		if err != nil || names(got) != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.c, names(got), err, tc.want)
		}
	}
}

func TestSplitPath(t *testing.T) {
	for in, want := range map[string][]string{
		"spec":                                   {"spec"},
		"spec.mutations[1].jsonPatch.expression": {"spec", "mutations", "[1]", "jsonPatch", "expression"},
		"cases[0]":                               {"cases", "[0]"},
		"a[1][2].b":                              {"a", "[1]", "[2]", "b"},
	} {
		if got := splitPath(in); !reflect.DeepEqual(got, want) {
			t.Errorf("splitPath(%q) = %q, want %q", in, got, want)
		}
	}
}
