// Package version tells which mapc this is, from the build information the Go toolchain stamps
// into every binary: mapc's module version (a release tag, or a pseudo-version naming the commit
// for a build from a checkout), the commit and whether the tree had local changes, and the
// versions of the libraries whose behaviour mapc reproduces or runs (Gatekeeper's engine, the
// Kubernetes libraries, cel-go).
//
// It reads only build information; it must not depend on the rest of mapc.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a build says of itself.
type Info struct {
	// Version is mapc's module version: "v1.2.3", a pseudo-version such as
	// "v0.0.0-20261124172538-4334d16d6c2f" (with "+dirty" for a modified tree), or "(devel)" when
	// the toolchain stamped none (go test, a build outside version control).
	Version string `json:"version"`
	// Commit and Modified come from version control, when the build was made in a checkout.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the toolchain the binary was built with.
	Go string `json:"go"`
	// Libraries are the versions of the modules that decide mapc's results, by module path.
	Libraries []Library `json:"libraries"`
}

// Library is one module mapc was built with.
type Library struct {
	Role    string `json:"role"`
	Path    string `json:"path"`
	Version string `json:"version"`
}

// libraries lists the modules reported, with what each is to mapc.
var libraries = []struct{ role, path string }{
	{"Gatekeeper engine (reference and decoding)", "github.com/open-policy-agent/gatekeeper/v3"},
	{"Kubernetes API server (MAP admission code)", "k8s.io/apiserver"},
	{"Kubernetes API types", "k8s.io/api"},
	{"CEL", "github.com/google/cel-go"},
}

// Get reads the running binary's build information.
func Get() Info {
	info := Info{Version: "(devel)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	deps := map[string]string{}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version + " (replacing " + d.Version + ")"
		}
		deps[d.Path] = v
	}
	for _, l := range libraries {
		if v, ok := deps[l.path]; ok {
			info.Libraries = append(info.Libraries, Library{Role: l.role, Path: l.path, Version: v})
		}
	}
	return info
}

// String is the one-line form: the version, and the commit when the version does not name it.
func (i Info) String() string {
	s := i.Version
	if i.Commit != "" && !strings.Contains(s, shortCommit(i.Commit)) {
		s += " (commit " + shortCommit(i.Commit)
		if i.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
