package lower

import (
	"strings"
	"testing"
)

// TestAlwaysMaps: the maps every object of a built-in kind has at admission are its struct
// fields; maps, pointers and custom resources give nothing.
func TestAlwaysMaps(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		has, hasNot      []string
	}{
		{"v1", "Pod", []string{"metadata", "spec", "status"}, []string{"metadata.labels", "spec.securityContext", "spec.containers"}},
		{"apps/v1", "Deployment", []string{"spec.template.metadata", "spec.template.spec", "spec.strategy"}, []string{"spec.selector", "spec.strategy.rollingUpdate", "spec.template.metadata.annotations"}},
		{"batch/v1", "CronJob", []string{"spec.jobTemplate.spec.template.metadata"}, []string{"spec.jobTemplate.spec.selector"}},
		{"v1", "ConfigMap", []string{"metadata"}, []string{"data", "binaryData"}},
		{"example.com/v1", "Widget", nil, []string{"metadata", "spec"}},
	} {
		always := alwaysMaps(tc.apiVersion, tc.kind)
		key := func(dotted string) string { return pathKey(strings.Split(dotted, ".")) }
		for _, p := range tc.has {
			if !always[key(p)] {
				t.Errorf("%s %s: %s is not always there", tc.apiVersion, tc.kind, p)
			}
		}
		for _, p := range tc.hasNot {
			if always[key(p)] {
				t.Errorf("%s %s: %s is always there, but an object may lack it", tc.apiVersion, tc.kind, p)
			}
		}
	}
	if !rootMaps("example.com/v1", "Widget")["metadata"] {
		t.Error("rootMaps of a custom resource: no metadata")
	}
}
