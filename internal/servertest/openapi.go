package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"
)

// Documented calls a test server's API and checks every answer against the OpenAPI document the
// server publishes at /api/openapi.json, so an extension's tests prove its routes and the
// document agree.
type Documented struct {
	url    string
	router routers.Router
}

// NewDocumented loads and validates the OpenAPI document of the server at url.
func NewDocumented(t *testing.T, url string) *Documented {
	t.Helper()
	resp, err := http.Get(url + "/api/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	doc, err := openapi3.NewLoader().LoadFromData(data)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the document is valid OpenAPI 3")
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return &Documented{url: url, router: router}
}

// Call sends method path with body (JSON-encoded, or sent as is when a string) and a bearer
// token, checks that the route is documented and the answer matches the document, and returns
// the status and body.
func (d *Documented) Call(t *testing.T, method, path string, body any, token string) (int, []byte) {
	t.Helper()
	var reqBody []byte
	if body != nil {
		if raw, ok := body.(string); ok {
			reqBody = []byte(raw)
		} else {
			var err error
			reqBody, err = json.Marshal(body)
			require.NoError(t, err)
		}
	}
	req, err := http.NewRequest(method, d.url+path, bytes.NewReader(reqBody))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	check, err := http.NewRequest(method, d.url+path, bytes.NewReader(reqBody))
	require.NoError(t, err)
	check.Header = req.Header.Clone()
	route, params, err := d.router.FindRoute(check)
	require.NoError(t, err, "%s %s is documented", method, path)
	input := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(data)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out), "%s %s answered %d: %s", method, path, resp.StatusCode, data)
	return resp.StatusCode, data
}
