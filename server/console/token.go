package console

import "github.com/commandbus/commandbus/server/internal/httpx"

// Token is one bearer token an operator signs in with: its Subject (who holds it, recorded on
// every action taken with it), the secret Token (at least 16 characters) and its Role (viewer or
// operator). It is server.Token too.
type Token = httpx.Token
