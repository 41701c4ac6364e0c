package emit

import (
	"bytes"
	"os"
	"path/filepath"
)

// versionPrefix starts the header line naming the mapc build that generated a file.
const versionPrefix = "# mapc version: "

// Stamp adds the line naming the generator's version after the Header of a generated YAML
// file, so that a directory says which build of mapc wrote it. Content without the Header
// (JSON, which has no comments) is returned as it is.
func Stamp(content []byte, version string) []byte {
	if version == "" || !bytes.HasPrefix(content, []byte(Header)) {
		return content
	}
	out := make([]byte, 0, len(content)+len(versionPrefix)+len(version)+1)
	out = append(out, Header...)
	out = append(out, versionPrefix+version+"\n"...)
	return append(out, content[len(Header):]...)
}

// StampFiles stamps every file.
func StampFiles(files []File, version string) []File {
	out := make([]File, len(files))
	for i, f := range files {
		out[i] = File{Name: f.Name, Content: Stamp(f.Content, version)}
	}
	return out
}

// VersionOf returns the version a generated file names ("" if none).
func VersionOf(content []byte) string {
	rest, ok := bytes.CutPrefix(content, []byte(Header))
	if !ok {
		return ""
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	v, ok := bytes.CutPrefix(line, []byte(versionPrefix))
	if !ok {
		return ""
	}
	return string(v)
}

// unstamped is content without its version line.
func unstamped(content []byte) []byte {
	v := VersionOf(content)
	if v == "" {
		return content
	}
	return append([]byte(Header), content[len(Header)+len(versionPrefix)+len(v)+1:]...)
}

// VersionDrift reports whether dir differs from files only in the mapc version its headers
// name, and which versions those are: a --check failing for that reason is a different build
// of mapc, not a change of the mutators.
func VersionDrift(dir string, files []File) (bool, []string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, nil
	}
	have := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return false, nil
		}
		have[e.Name()] = data
	}
	if len(have) != len(files) {
		return false, nil
	}
	seen := map[string]bool{}
	var versions []string
	for _, f := range files {
		h, ok := have[f.Name]
		if !ok || !bytes.Equal(unstamped(h), unstamped(f.Content)) {
			return false, nil
		}
		if v := VersionOf(h); !seen[v] {
			seen[v] = true
			versions = append(versions, v)
		}
	}
	for i, v := range versions {
		if v == "" {
			versions[i] = "an unknown version"
		}
	}
	return true, versions
}
