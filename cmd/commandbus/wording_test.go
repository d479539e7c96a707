package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// specificationReference matches a reference to the design documents the code was built from
// ("seed 000", "seeds 001/004", "the specification"): words an operator cannot look up.
var specificationReference = regexp.MustCompile(`(?i)\bseeds?\s*[-_#]?\s*0\d\d\b|\bspecifications?\b|\bseeds?/`)

// No --help text speaks of the specification documents.
func TestHelpHasNoSpecificationReferences(t *testing.T) {
	t.Parallel()
	walkCommands(newRootCommand(), func(c *cobra.Command) {
		text := strings.Join([]string{c.Use, c.Short, c.Long, c.Example, c.Flags().FlagUsages(), c.PersistentFlags().FlagUsages()}, "\n")
		require.NotRegexp(t, specificationReference, text, "%s --help", c.CommandPath())
	})
}

// No console template or string in the console's and the payments pages' code speaks of the
// specification documents.
func TestConsoleHasNoSpecificationReferences(t *testing.T) {
	t.Parallel()
	var checked int
	for _, dir := range []string{"../../server/console", "../../examples/payments/paymentsweb"} {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch ext := filepath.Ext(path); {
			case strings.HasSuffix(path, "_test.go"):
				return nil
			case ext == ".go":
				file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0) // comments are not shown to anyone
				require.NoError(t, err)
				ast.Inspect(file, func(n ast.Node) bool {
					if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						require.NotRegexp(t, specificationReference, lit.Value, "%s", path)
					}
					return true
				})
			case ext == ".html" || ext == ".js" || ext == ".css" || ext == ".svg":
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NotRegexp(t, specificationReference, string(b), "%s", path)
			default:
				return nil
			}
			checked++
			return nil
		}))
	}
	require.Greater(t, checked, 20, "the console's files were found")
	require.Regexp(t, specificationReference, "as seed 004 says")
	require.NotRegexp(t, specificationReference, "--seed of the simulators")
}
