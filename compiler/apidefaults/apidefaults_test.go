package apidefaults

import (
	"slices"
	"testing"
)

// TestAfter: a container's new limits fill its requests in a Pod, not in a Deployment's
// template; the host network fills host ports; a label write fills nothing.
func TestAfter(t *testing.T) {
	has := func(ds []Defaulted, chain ...string) bool {
		return slices.ContainsFunc(ds, func(d Defaulted) bool { return slices.Equal(d.Fields, chain) })
	}
	limits := []string{"spec", "containers", AnyField, "resources", "limits", "memory"}
	if ds := After("/Pod", limits); !has(ds, "spec", "containers", AnyField, "resources", "requests") {
		t.Errorf("Pod limits: %v, want the requests", ds)
	}
	if ds := After("/Pod", limits); !has(ds, "spec", "containers", AnyField, "resources", "requests", "memory") || has(ds, "spec", "containers", AnyField, "resources", "requests", AnyField) {
		t.Errorf("Pod memory limit: %v, want the memory request only", ds)
	}
	if ds := After("apps/Deployment", []string{"spec", "template", "spec", "containers", AnyField, "resources", "limits"}); has(ds, "spec", "template", "spec", "containers", AnyField, "resources", "requests") {
		t.Errorf("template limits: %v, want no requests (pod templates are not defaulted so)", ds)
	}
	if ds := After("/Pod", []string{"spec", "containers"}); !has(ds, "spec", "containers", AnyField, "imagePullPolicy") {
		t.Errorf("Pod containers: %v, want a new container's imagePullPolicy", ds)
	}
	if ds := After("/Pod", []string{"spec", "hostNetwork"}); !has(ds, "spec", "containers", AnyField, "ports", AnyField, "hostPort") {
		t.Errorf("hostNetwork: %v, want host ports", ds)
	}
	if ds := After("/Pod", []string{"metadata", "labels", "app"}); len(ds) != 0 {
		t.Errorf("a label: %v, want nothing", ds)
	}
	if !Prefix([]string{"spec", AnyField}, []string{"spec", "x", "y"}) || Prefix([]string{"spec", "a"}, []string{"spec", "b"}) {
		t.Error("Prefix")
	}
}
