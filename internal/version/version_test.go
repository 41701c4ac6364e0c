package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/mapc-dev/mapc", Version: "v0.0.0-20261124172538-4334d16d6c2f+dirty"},
		Deps: []*debug.Module{
			{Path: "github.com/open-policy-agent/gatekeeper/v3", Version: "v3.23.1"},
			{Path: "k8s.io/apiserver", Version: "v0.37.1"},
			{Path: "github.com/google/cel-go", Version: "v0.30.0", Replace: &debug.Module{Path: "example.com/cel-go", Version: "v0.30.1"}},
			{Path: "example.com/other", Version: "v1.0.0"},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4334d16d6c2f0123456789"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := fromBuildInfo(bi)
	if got.Version != bi.Main.Version || got.Go != "go1.26.8" || got.Commit != "4334d16d6c2f0123456789" || !got.Modified {
		t.Fatalf("got %+v", got)
	}
	want := map[string]string{
		"github.com/open-policy-agent/gatekeeper/v3": "v3.23.1",
		"k8s.io/apiserver":                           "v0.37.1",
		"github.com/google/cel-go":                   "v0.30.1 (replacing v0.30.0)",
	}
	if len(got.Libraries) != len(want) {
		t.Fatalf("libraries %+v, want %v", got.Libraries, want)
	}
	for _, l := range got.Libraries {
		if want[l.Path] != l.Version || l.Role == "" {
			t.Errorf("%s: %q (role %q), want %q", l.Path, l.Version, l.Role, want[l.Path])
		}
	}
	// The pseudo-version names the commit: the one-line form does not repeat it.
	if s := got.String(); s != bi.Main.Version {
		t.Errorf("String() = %q", s)
	}
	// A tagged release built from a checkout names the commit.
	bi.Main.Version = "v1.2.3"
	if s := fromBuildInfo(bi).String(); s != "v1.2.3 (commit 4334d16d6c2f, modified)" {
		t.Errorf("String() = %q", s)
	}
	bi.Main.Version, bi.Settings = "", nil
	if s := fromBuildInfo(bi).String(); s != "(devel)" {
		t.Errorf("String() = %q", s)
	}
}
