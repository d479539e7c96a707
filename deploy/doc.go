// Package deploy holds what running commandbus in production takes, and the tests that keep it
// honest: the container image built with ko (../.ko.yaml) or from Containerfile, the Kubernetes
// and OpenShift manifests under kubernetes/ (Kustomize: a base, one directory per worker
// profile, overlays), and the JSON schemas they are validated against (schemas/, generated from
// the k8s.io/api Go types by cmd/genschemas).
//
// It is its own Go module so that the tools the tests use (kustomize, kubeconform, ko,
// go-containerregistry, k8s.io/api) stay out of commandbus's go.mod: an application importing
// commandbus never downloads them. .ci/run runs its tests:
//
//	cd deploy && go test ./...
//
// The tests render every overlay with kustomize, validate each resource strictly with
// kubeconform, check that each worker Deployment's COMMANDBUS_* environment configures the same
// features, domains and command steps as its profile in examples/profiles, run the binary as the
// pods would against PostgreSQL (migration Job, serve, workers), check the README's PgBouncer
// advice through a real PgBouncer, and build the image with ko to a tarball whose configuration
// they check (user, entrypoint, build flags). The last two need ko and pgbouncer and skip without
// them unless COMMANDBUS_REQUIRE_KO=1 or COMMANDBUS_REQUIRE_PGBOUNCER=1.
package deploy
