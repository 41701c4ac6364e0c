package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mapc-dev/mapc/verify"
)

// formatFlag is -o/--output: the output format, as kubectl, gator and kubeconform read -o.
type formatFlag struct {
	value   string
	def     string
	allowed []string
}

func addFormatFlag(fl *pflag.FlagSet, f *formatFlag, def string, allowed ...string) {
	f.allowed, f.def = allowed, def
	fl.StringVarP(&f.value, "output", "o", def, "output format: "+strings.Join(allowed, ", "))
}

// check validates the format; a value that looks like a path gets a hint, since -o named the
// output directory of compile in earlier versions of mapc and names a file in other tools.
// "-o -" (standard output, where the result goes anyway) is the default format.
func (f *formatFlag) check(cmd string) error {
	if f.value == "-" {
		f.value = f.def
	}
	for _, a := range f.allowed {
		if f.value == a {
			return nil
		}
	}
	use := strings.Join(f.allowed, ", ")
	switch {
	case cmd == "compile" && looksLikePath(f.value):
		return usageErr("-o %q: -o is the output format (%s); to write one file per policy and a kustomization.yaml into a directory, use --output-dir %s; for one file, redirect standard output (> %s)", f.value, use, f.value, f.value)
	case looksLikePath(f.value):
		return usageErr("-o %q: -o is the output format (%s), not a file; redirect standard output instead (> %s)", f.value, use, f.value)
	}
	return usageErr("-o %q: use %s", f.value, use)
}

// looksLikePath: does s read as a file or directory rather than a format name?
func looksLikePath(s string) bool {
	if strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, ".") {
		return true
	}
	for _, ext := range []string{".yaml", ".yml", ".json", ".xml", ".txt", ".sarif"} {
		if strings.HasSuffix(strings.ToLower(s), ext) {
			return true
		}
	}
	if _, err := os.Stat(s); err == nil {
		return true
	}
	return false
}

// formatNames are every -o value of every command: a directory flag given one of them is
// most likely a mistaken -o.
var formatNames = []string{"yaml", "json", "text", "junit", "github", "sarif"}

// checkOutputDir rejects directory names that look like a format or a single file.
func checkOutputDir(dir string) error {
	base := filepath.Base(dir)
	for _, f := range formatNames {
		if dir == f {
			return usageErr("--output-dir %q: that is an output format; did you mean -o %s? (to write into a directory of that name, give it as ./%s)", dir, f, f)
		}
	}
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if strings.HasSuffix(strings.ToLower(base), ext) {
			return usageErr("--output-dir %q: names a directory (one file per policy and a kustomization.yaml), not a file; for one file, redirect standard output (> %s)", dir, dir)
		}
	}
	return nil
}

// inputPaths joins -f paths and positional arguments, which kubectl-style tools read alike.
func inputPaths(files, args []string) []string {
	return append(append([]string(nil), files...), args...)
}

// writeSuites writes verify's and test's results in the -o format.
func writeSuites(w io.Writer, format, name string, suites ...verify.Suite) error {
	switch format {
	case "json":
		return verify.WriteJSON(w, suites...)
	case "junit":
		return verify.WriteJUnit(w, name, suites...)
	case "github":
		return verify.WriteGitHub(w, suites...)
	}
	var rs []verify.Result
	var skipped []verify.Skip
	for _, s := range suites {
		rs = append(rs, s.Results...)
		skipped = append(skipped, s.Skipped...)
	}
	summary := verify.Summary(rs)
	text := strings.TrimSuffix(verify.Report(rs), summary+"\n")
	for _, sk := range skipped {
		text += fmt.Sprintf("SKIP %s: %s\n", sk.Case, sk.Reason)
	}
	if len(skipped) > 0 {
		summary += fmt.Sprintf(", %d skipped", len(skipped))
	}
	_, err := io.WriteString(w, text+summary+"\n")
	return err
}
