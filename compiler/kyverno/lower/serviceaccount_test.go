package lower

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
)

// kyvernoServiceAccount is Kyverno v1.19.1's pkg/engine/context AddServiceAccount: the name and
// namespace it puts in the context for the user name u.
func kyvernoServiceAccount(u string) (name, namespace string) {
	saPrefix := "system:serviceaccount:"
	var sa string
	if len(u) > len(saPrefix) {
		sa = u[len(saPrefix):]
	}
	groups := strings.Split(sa, ":")
	if len(groups) >= 2 {
		name, namespace = groups[1], groups[0]
	}
	return name, namespace
}

// serviceAccountEval evaluates serviceAccountName and serviceAccountNamespace lowered, for the
// user name u, in the API server's CEL environment; it returns Kyverno's values as Go's JSON
// writes them (bytes that are not UTF-8 as U+FFFD) next to the CEL's.
func serviceAccountEval(t *testing.T, u string) (want, got [2]string) {
	t.Helper()
	env := apiServerCEL(t, "request")
	printer := cel.NewEnv(version.MajorMinor(1, 37))
	name, ns := kyvernoServiceAccount(u)
	for i, s := range []string{ns, name} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range []string{"serviceAccountNamespace", "serviceAccountName"} {
		lv, err := variable(v, Scope{})
		if err != nil {
			t.Fatal(err)
		}
		if lv.lossy != (i == 0) || lv.t != tStr || lv.missing {
			t.Fatalf("%s: lossy %v, types %s, missing %v", v, lv.lossy, typeNames(lv.t), lv.missing)
		}
		text, err := printer.Print(lv.e)
		if err != nil {
			t.Fatal(err)
		}
		ast, iss := env.Compile(text)
		if iss.Err() != nil {
			t.Fatalf("%s: %s does not compile: %v", v, text, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": u}}})
		if err != nil {
			t.Fatalf("%s for %q: %v", v, u, err)
		}
		got[i] = out.Value().(string)
	}
	return want, got
}

// TestServiceAccount: serviceAccountName and serviceAccountNamespace, lowered, give Kyverno's
// values: for service accounts, for other users (""), for names that Kyverno cuts at the 22nd
// byte without checking the prefix, and for cuts inside a character.
func TestServiceAccount(t *testing.T) {
	for _, u := range []string{
		"", "admin", "mapc", "system:serviceaccount:", "system:serviceaccount:ns", "system:serviceaccount:ns:",
		"system:serviceaccount:ci:deployer", "system:serviceaccount:ci:deployer:extra", "system:serviceaccount::x",
		"oidc:alice@example.com:team:x", "0123456789012345678901", "0123456789012345678901:b", "0123456789012345678901a:b",
		"système:serviceaccount:ns:name", "systèmes:serviceaccount:ns:name", "ééééééééééé:a:b", "éééééééééééa:b:c",
		"日本語日本語日本語日本:x:y", "日本語日本語日本語日本語:x:y", "🙂🙂🙂🙂🙂:ns:name", "🙂🙂🙂🙂🙂🙂:ns:name", "a🙂🙂🙂🙂🙂:n:m",
		"system:serviceaccount:名前空間:名前",
	} {
		want, got := serviceAccountEval(t, u)
		if want != got {
			t.Errorf("user %q: Kyverno's namespace, name %q, the CEL's %q", u, want, got)
		}
	}
}

// FuzzServiceAccount: as TestServiceAccount, for any user name.
func FuzzServiceAccount(f *testing.F) {
	for _, u := range []string{"system:serviceaccount:a:b", "ééééééééééé:a:b", "🙂🙂🙂🙂🙂:n:m", "x"} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if !utf8.ValidString(u) {
			return // the API server's user names are JSON strings
		}
		want, got := serviceAccountEval(t, u)
		if want != got {
			t.Errorf("user %q: Kyverno's namespace, name %q, the CEL's %q", u, want, got)
		}
	})
}
