// Command imagebase pushes the minimal base image of package imagebase (scratch, a CA bundle,
// passwd and group, /tmp, user 65532) to a registry, for builds that cannot pull
// gcr.io/distroless/static. Then point ko at it:
//
//	go run ./cmd/imagebase --ca-bundle /etc/ssl/certs/ca-certificates.crt registry.internal/base/commandbus:1
//	KO_DEFAULTBASEIMAGE=registry.internal/base/commandbus:1 ko build --bare ./cmd/commandbus
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/commandbus/commandbus/deploy/internal/imagebase"
)

func main() {
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM file of the CA certificates the image trusts")
	arch := flag.String("arch", runtime.GOARCH, "the image's architecture")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: imagebase [--ca-bundle FILE] [--arch ARCH] REGISTRY/REPOSITORY:TAG")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*caBundle, *arch, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "imagebase:", err)
		os.Exit(1)
	}
}

func run(caBundlePath, arch, reference string) error {
	ref, err := name.ParseReference(reference)
	if err != nil {
		return err
	}
	caBundle, err := os.ReadFile(caBundlePath)
	if err != nil {
		return err
	}
	img, err := imagebase.Image(caBundle, arch)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref.Context(), digest)
	return nil
}
