package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// tokenBytes is how many random bytes a generated token holds (256 bits).
const tokenBytes = 32

// minTokenLength is the shortest secret the configuration accepts as a token.
const minTokenLength = 16

// tokenRandom is the source of generated tokens; tests replace it.
var tokenRandom io.Reader = rand.Reader

// newTokenCommand is `token`: make and hash the bearer tokens of server.tokens.
func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Generate a bearer token, or print the SHA-256 digest server.tokens[].token-sha256 takes",
		Long: "The API and console take bearer tokens listed in server.tokens. `token generate` prints a new random\n" +
			"token (32 bytes, base64url); `token hash` prints the SHA-256 digest of a token for token-sha256, so\n" +
			"the configuration never holds the secret:\n\n" +
			"  TOKEN=$(commandbus token generate)\n" +
			"  printf %s \"$TOKEN\" | commandbus token hash",
	}
	cmd.AddCommand(newTokenGenerateCommand(), newTokenHashCommand())
	return cmd
}

// tokenReport is a generated token with its digest (-o json).
type tokenReport struct {
	Token  string `json:"token"`
	SHA256 string `json:"sha256"`
}

func newTokenGenerateCommand() *cobra.Command {
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Print a new random token (32 bytes, base64url); -o json adds its SHA-256",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := make([]byte, tokenBytes)
			if _, err := io.ReadFull(tokenRandom, raw); err != nil {
				return fmt.Errorf("reading random bytes: %w", err)
			}
			token := base64.RawURLEncoding.EncodeToString(raw)
			if output.structured() {
				return output.writeOne(cmd.OutOrStdout(), tokenReport{Token: token, SHA256: tokenSHA256(token)})
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	output.register(cmd)
	return cmd
}

func newTokenHashCommand() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "hash",
		Short: "Print the SHA-256 (hex) of a token read from stdin (or --token) for token-sha256",
		Long: "Print the hex SHA-256 digest of a token, the value of server.tokens[].token-sha256. The token is read\n" +
			"from standard input, one trailing newline dropped (as token-file does), or from --token, which\n" +
			"leaves it in the shell's history and the process list: prefer stdin.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("token") {
				data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
				if err != nil {
					return fmt.Errorf("reading the token from stdin: %w", err)
				}
				token = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
			}
			if token == "" {
				return usageErrorf("no token: pipe it on stdin or give --token")
			}
			if len(token) < minTokenLength {
				return usageErrorf("the token must be at least %d characters (the configuration refuses shorter ones), got %d", minTokenLength, len(token))
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), tokenSHA256(token))
			return err
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the token (default: read from stdin)")
	return cmd
}

// tokenSHA256 is the hex SHA-256 of token, as token-sha256 holds it.
func tokenSHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
