// Package e2e tests mapc's output against a real kube-apiserver (with etcd).
//
// The tests live in this package's _test.go files and are skipped unless MAPC_E2E_KUBECONFIG
// names a kubeconfig for a throw-away API server: they create and delete namespaces, pods and
// MutatingAdmissionPolicies cluster-wide. `make e2e` (hack/e2e.sh) builds kube-apiserver and etcd
// from the Go module proxy, starts them on 127.0.0.1, runs the tests and tears everything down.
// See README.md.
//
// It only checks what the compiler emits; no other package may import it.
package e2e
