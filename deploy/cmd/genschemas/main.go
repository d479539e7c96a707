// Command genschemas writes the JSON schemas of the Kubernetes kinds the manifests use into
// deploy/schemas, generated from the Go API types (see package k8sschema). Run it from deploy/
// after changing the k8s.io/api version or adding a kind:
//
//	go run ./cmd/genschemas
//
// TestSchemasAreGenerated fails when the committed schemas differ from what it writes.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/commandbus/commandbus/deploy/internal/k8sschema"
)

func main() {
	dir := "schemas"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, kind := range k8sschema.Kinds {
		data, err := k8sschema.Generate(kind)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, kind.FileName()), data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", kind.Kind, err)
			os.Exit(1)
		}
	}
}
