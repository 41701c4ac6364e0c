package backend

import (
	"fmt"
	"sort"

	"github.com/mapc-dev/mapc/compiler/route"
)

// statusKinds are the built-in kinds served with a status subresource (group/kind), whose
// requests carry the object itself: the API server keeps what the request changes in the
// status, and in a few kinds the metadata, and takes the rest from the stored object.
var statusKinds = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/PersistentVolumeClaim": true,
	"/Pod": true, "/ReplicationController": true, "/ResourceQuota": true, "/Service": true,
	"apps/DaemonSet": true, "apps/Deployment": true, "apps/ReplicaSet": true, "apps/StatefulSet": true,
	"autoscaling/HorizontalPodAutoscaler": true,
	"batch/CronJob":                       true, "batch/Job": true,
	"certificates.k8s.io/CertificateSigningRequest":           true,
	"flowcontrol.apiserver.k8s.io/FlowSchema":                 true,
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration": true,
	"networking.k8s.io/Ingress":                               true,
	"networking.k8s.io/ServiceCIDR":                           true,
	"resource.k8s.io/ResourceClaim":                           true,
	"policy/PodDisruptionBudget":                              true,
	"storage.k8s.io/VolumeAttachment":                         true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":  true,
}

// StatusKinds lists the built-in kinds (group/Kind) mapc takes as served with a status
// subresource, for the e2e to check against the API server's discovery.
func StatusKinds() []string {
	var out []string
	for k := range statusKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// subresourceOf checks that requests for the subresource sub of k carry a k, as Kyverno's rules
// for it read them (the request's object is the rule's resource): the status of a kind served
// with one (a custom resource's where its CustomResourceDefinition enables it), and a Pod's
// ephemeralcontainers. Other subresources carry other kinds (a scale a Scale, a binding a
// Binding, an eviction an Eviction) or none (exec, log, proxy).
func subresourceOf(k gk, sub string, opts route.Options) error {
	switch {
	case sub == "ephemeralcontainers" && k.Group == "" && k.Kind == "Pod":
		return nil
	case sub == "status":
		for _, crd := range opts.CRDs {
			if crd.Spec.Group != k.Group || crd.Spec.Names.Kind != k.Kind {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Name == k.Version {
					if v.Subresources == nil || v.Subresources.Status == nil {
						return fmt.Errorf("the CustomResourceDefinition of %s enables no status subresource in %s", k.Kind, k.Version)
					}
					return nil
				}
			}
		}
		if statusKinds[k.Group+"/"+k.Kind] {
			return nil
		}
		return fmt.Errorf("%s is not served with a status subresource that mapc knows of", kindName(gk{Group: k.Group, Version: k.Version, Kind: k.Kind}))
	}
	return fmt.Errorf("the subresource %q is not supported: only status and a Pod's ephemeralcontainers, whose requests carry the object itself, are translated (others carry another kind, such as a scale's Scale, or none)", sub)
}
