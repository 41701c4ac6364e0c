package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestServe(t *testing.T) {
	setup := `{"policies":[{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"team"},"spec":{"rules":[{"name":"team","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{"metadata":{"labels":{"team":"payments"}}}}}]}}]}`
	pod := `{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}`
	tests := []struct {
		name  string
		in    string
		want  []string // output lines
		fails bool
	}{{
		name: "a setup and two requests",
		in:   setup + "\n" + pod + "\n" + `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}}` + "\n",
		want: []string{
			`{"ready":true}`,
			`{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"team":"payments"},"name":"web","namespace":"default"},"spec":{"containers":[{"image":"nginx","name":"app"}]}}}`,
			`{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}}`,
		},
	}, {
		name:  "a bad setup",
		in:    `{"policies":[{"apiVersion":"v1","kind":"ConfigMap"}]}` + "\n",
		want:  []string{`{"error":"policies[0]: v1 ConfigMap is not a Kyverno policy"}`},
		fails: true,
	}, {
		name:  "a malformed request",
		in:    setup + "\n{nope\n",
		want:  []string{`{"ready":true}`, `{"error":"request: invalid character 'n' looking for beginning of object key string"}`},
		fails: true,
	}, {
		name: "a request that is JSON but not a request, then a good one",
		in:   setup + "\n" + `{"object":{"apiVersion":"v1"}}` + "\n" + pod + "\n",
		want: []string{`{"ready":true}`, `{"error":"request: Object 'Kind' is missing in '{\"apiVersion\":\"v1\"}'"}`,
			`{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"team":"payments"},"name":"web","namespace":"default"},"spec":{"containers":[{"image":"nginx","name":"app"}]}}}`},
	}, {
		name: "a request the reference cannot serve",
		in:   setup + "\n{}\n",
		want: []string{`{"ready":true}`, `{"error":"a request needs an object (an old object for DELETE)"}`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := serve(strings.NewReader(tc.in), &out)
			if (err != nil) != tc.fails {
				t.Errorf("err = %v, want failure %v", err, tc.fails)
			}
			got := strings.Split(strings.TrimSpace(out.String()), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), strings.Join(tc.want, "\n"))
			}
		})
	}
}
