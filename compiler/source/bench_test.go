package source

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParse reads 10,000 mutators (the bundled examples, repeated) as one stream.
func BenchmarkParse(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "gatekeeper", "*.yaml"))
	if err != nil || len(files) == 0 {
		b.Fatal("no examples", err)
	}
	var one bytes.Buffer
	docs := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		ds, err := Parse(f, data)
		if err != nil {
			b.Fatal(err)
		}
		docs += len(ds)
		one.WriteString("---\n")
		one.Write(data)
	}
	data := bytes.Repeat(one.Bytes(), 10000/docs)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Parse("m.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
