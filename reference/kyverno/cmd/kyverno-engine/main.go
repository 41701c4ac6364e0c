// Command kyverno-engine serves admission requests through Kyverno v1.19.1's own mutation
// engine, driven as Kyverno's admission webhook drives it (package
// github.com/mapc-dev/mapc/reference/kyverno): it is the reference mapc verifies the policies it
// compiles from Kyverno's mutate rules against, and must not re-implement anything Kyverno
// decides.
//
// It speaks JSON lines on standard input and output. The first input line is the setup
// (kyverno.Setup: the policies, Kyverno's ConfigMap data, custom resources); it is answered with
// {"ready":true} or {"error":"..."} (then the program exits with status 1). Every further line is
// one request (kyverno.Request: object, oldObject, operation, subResource, namespace, userInfo,
// order),
// answered by one line (kyverno.Response: the resulting object, Kyverno's denial, or an error).
// The program ends at the end of its input.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mapc-dev/mapc/reference/kyverno"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: kyverno-engine < requests (JSON lines: a setup line, then one request per line)")
		os.Exit(2)
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kyverno-engine: "+err.Error())
		os.Exit(1)
	}
}

type ready struct {
	Ready bool   `json:"ready,omitempty"`
	Error string `json:"error,omitempty"`
}

func serve(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<20))
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	send := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		return w.Flush()
	}
	var setup kyverno.Setup
	if err := dec.Decode(&setup); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("no setup line")
		}
		_ = send(ready{Error: "setup: " + err.Error()})
		return fmt.Errorf("setup: %w", err)
	}
	engine, err := kyverno.New(setup)
	if err != nil {
		_ = send(ready{Error: err.Error()})
		return err
	}
	if err := send(ready{Ready: true}); err != nil {
		return err
	}
	ctx := context.Background()
	for {
		var req kyverno.Request
		err := dec.Decode(&req)
		if errors.Is(err, io.EOF) {
			return nil
		}
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The stream cannot be resynchronised after a malformed line.
			_ = send(kyverno.Response{Error: "request: " + err.Error()})
			return fmt.Errorf("request: %w", err)
		}
		if err != nil {
			// Well-formed JSON that is not a request (an object without kind): the decoder
			// has read the whole line, so the next one is answered.
			if err := send(kyverno.Response{Error: "request: " + err.Error()}); err != nil {
				return err
			}
			continue
		}
		if err := send(engine.Admit(ctx, req)); err != nil {
			return err
		}
	}
}
