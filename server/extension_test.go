package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	. "github.com/commandbus/commandbus/server"
)

// The server is a library: it imports no example application, and only the root package, the
// driver, the orchestration runtime, the process model, money (how amounts are written), the
// trace context and tracing packages, internal packages of this module and its own subpackages
// (the console and their shared HTTP helpers).
func TestServerImportsNoExample(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/commandbus/commandbus/server").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/commandbus/commandbus/server")
	for _, dep := range deps {
		require.NotContains(t, dep, "/examples/", "the server depends on %s", dep)
	}

	out, err = exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/commandbus/commandbus/server/...").CombinedOutput()
	require.NoError(t, err, "%s", out)
	const module = "github.com/commandbus/commandbus"
	for _, imp := range strings.Fields(string(out)) {
		if imp != module && !strings.HasPrefix(imp, module+"/") {
			continue
		}
		rest := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
		top, _, _ := strings.Cut(rest, "/")
		require.Contains(t, []string{"", "driver", "orchestration", "process", "money", "internal", "server", "tracecontext", "tracing"}, top,
			"the server imports %s", imp)
	}
}

// A server without extensions serves its generic API and console, and answers the routes an
// extension would add with 404, as any unknown route.
func TestServerWithoutExtensions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		id := f.parked(t)

		resp, body := f.do(t, "GET", "/api/tsq/commands", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Contains(t, string(body), id.String())
		for _, path := range []string{"/api/payments", "/api/batches", "/api/approvals", "/api/network/pending",
			"/api/payments/" + uuid.NewString()} {
			resp, body := f.do(t, "GET", path, viewerToken, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", path, body)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), path)
			require.Contains(t, string(body), `"code":"NOT_FOUND"`, path)
		}
		resp, _ = f.do(t, "POST", "/api/payments", operatorToken, map[string]string{})
		require.Equal(t, http.StatusNotFound, resp.StatusCode)

		for _, path := range []string{"/", "/tsq/commands", "/tsq/processes", "/dlq", "/search", "/search?q=" + id.String(), "/commands/" + id.String()} {
			resp, body := f.do(t, "GET", path, viewerToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
			require.Contains(t, resp.Header.Get("Content-Type"), "text/html", path)
			page := string(body)
			require.NotContains(t, page, `href="/payments"`, path)
			require.NotContains(t, page, `href="/batches"`, path)
			require.Contains(t, page, `placeholder="Execution or command id"`, path)
		}
		for _, path := range []string{"/payments", "/batches", "/approvals", "/network"} {
			resp, body := f.do(t, "GET", path, viewerToken, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.Contains(t, string(body), "Page not found", path)
		}
		resp, _ = f.do(t, "GET", "/live/overview", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)

		resp, body = f.do(t, "GET", "/api/openapi.json", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var doc struct {
			Paths      map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		require.NoError(t, json.Unmarshal(body, &doc))
		require.Contains(t, doc.Paths, "/api/tsq/commands")
		for path := range doc.Paths {
			require.NotContains(t, path, "payment", "no payment route is documented")
		}
		require.NotContains(t, doc.Components.Schemas, "PaymentRequest")
	})
}

// noteExtension is a small application extension: a REST route, a console page with its
// navigation entry, a search section and an overview card.
type noteExtension struct {
	ExtensionBase
	m *Mount
}

type noteRequest struct {
	Text string `json:"text"`
}

func (e *noteExtension) Mount(m *Mount) error {
	e.m = m
	if err := m.Templates(fstest.MapFS{
		"web/_blocks.html": {Data: []byte(`{{define "note-line"}}<span class="note">note {{.}}</span>{{end}}`)},
		"web/notes.html":   {Data: []byte(`{{define "content"}}<h1 id="notes">Notes: {{.Data}}</h1>{{end}}`)},
	}, "web/*.html"); err != nil {
		return err
	}
	m.HandleAPI("POST /api/notes", RoleOperator, func(w http.ResponseWriter, r *http.Request) {
		var req noteRequest
		if err := DecodeBody(w, r, &req); err != nil {
			m.WriteError(w, r, err)
			return
		}
		WriteJSON(w, http.StatusCreated, map[string]string{"text": req.Text, "by": Subject(r)})
	})
	m.Document([]Operation{{ID: "createNote", Method: "post", Path: "/api/notes", Summary: "Write a note", Tag: "notes",
		Operator: true, Body: "NoteRequest", Example: map[string]any{"text": "hello"},
		Responses: map[string]any{"201": JSONResponse("The note.", map[string]any{"type": "object"})}}},
		map[string]any{"NoteRequest": RequestSchemaOf[noteRequest]()})
	m.HandlePage("GET /notes", RoleViewer, func(w http.ResponseWriter, r *http.Request) {
		p := m.NewPage(w, r, "Notes", "notes")
		p.Data = "none yet"
		m.Render(w, r, http.StatusOK, "notes.html", p)
	})
	m.Nav(NavEntry{Key: "notes", Label: "Notes", Href: "/notes"})
	m.ContextLabel("Note")
	return nil
}

func (e *noteExtension) Search(ctx context.Context, q string) (*SearchResult, error) {
	if q != "note-1" {
		return nil, nil
	}
	section, err := e.m.Fragment("note-line", q)
	if err != nil {
		return nil, err
	}
	return &SearchResult{Sections: []template.HTML{section}}, nil
}

func (e *noteExtension) Overview(ctx context.Context) (*Overview, error) {
	return &Overview{Cards: []Card{{ID: "count-notes", Label: "Notes", Value: 3, Unit: "written", Href: "/notes"}}}, nil
}

// An extension's route is served with the server's authentication and documented in
// /api/openapi.json; its page is rendered in the console's layout with its navigation entry; its
// search section and overview card are shown.
func TestExtensionMountsRoutesPagesAndHooks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client, err := commandbus.NewClient(drv, &commandbus.Config{Handlers: commandbus.NewHandlers(), MetricsRegisterer: prometheus.NewRegistry(),
			FetchPollInterval: commandbus.Duration(20 * time.Millisecond)})
		require.NoError(t, err)
		srv, err := New(Config{Client: client, Tokens: testTokens, Extensions: []Extension{&noteExtension{}}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		f := &fixture{Client: client, HTTP: hs}

		resp, body := f.do(t, "POST", "/api/notes", operatorToken, map[string]string{"text": "hello"})
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
		require.JSONEq(t, `{"text":"hello","by":"alice@ops"}`, string(body))
		resp, _ = f.do(t, "POST", "/api/notes", viewerToken, map[string]string{"text": "hello"})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "the role is enforced")
		resp, body = f.do(t, "POST", "/api/notes", operatorToken, map[string]any{"text": "hello", "extra": 1})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the body is read strictly: %s", body)

		doc := loadAPIDoc(t, hs.URL)
		require.NotNil(t, doc.doc.Paths.Find("/api/notes"), "the extension's route is documented")
		require.NotNil(t, doc.doc.Components.Schemas["NoteRequest"])
		x := send(t, "POST", hs.URL+"/api/notes", []byte(`{"text":"documented"}`), bearer(operatorToken))
		doc.checkRequest(t, x)
		require.True(t, doc.checkResponse(t, x))

		resp, body = f.do(t, "GET", "/notes", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		page := string(body)
		require.Contains(t, page, `<h1 id="notes">Notes: none yet</h1>`)
		require.Contains(t, page, `<a href="/notes" aria-current="page">Notes</a>`, "the navigation marks the page")
		require.Contains(t, page, "commandbus console", "the console's layout")

		resp, body = f.do(t, "GET", "/search?q=note-1", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, string(body), `<span class="note">note note-1</span>`)

		resp, body = f.do(t, "GET", "/", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, string(body), `id="count-notes"`)
	})
}

// A nil extension, one whose Mount fails, or one registering a bad role, a route, an operationId
// or a schema name the server has already, fails New with the reason.
func TestExtensionMountErrors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client, err := commandbus.NewClient(drv, &commandbus.Config{Handlers: commandbus.NewHandlers(), MetricsRegisterer: prometheus.NewRegistry()})
		require.NoError(t, err)
		_, err = New(Config{Client: client, Tokens: testTokens, Extensions: []Extension{nil}})
		require.ErrorContains(t, err, "Extensions[0] is nil")
		_, err = New(Config{Client: client, Tokens: testTokens, Extensions: []Extension{failingExtension{}}})
		require.ErrorContains(t, err, "mounting Extensions[0]: no database")
		_, err = New(Config{Client: client, Tokens: testTokens, Extensions: []Extension{clashingExtension{}}})
		require.ErrorContains(t, err, `route "GET /extra": role must be "viewer" or "operator", got "admin"`)
		require.ErrorContains(t, err, `route "GET /api/queues"`, "a route the server has already is refused")
		require.ErrorContains(t, err, `the operationId "getHealth" is empty or taken`)
		require.ErrorContains(t, err, `OpenAPI schema "Problem": the name is taken`)
	})
}

type failingExtension struct{ ExtensionBase }

func (failingExtension) Mount(*Mount) error { return errors.New("no database") }

// clashingExtension registers a route with an unknown role and one the server has.
type clashingExtension struct{ ExtensionBase }

func (clashingExtension) Mount(m *Mount) error {
	m.HandlePage("GET /extra", "admin", func(http.ResponseWriter, *http.Request) {})
	m.HandleAPI("GET /api/queues", RoleViewer, func(http.ResponseWriter, *http.Request) {})
	m.Document([]Operation{{ID: "getHealth", Method: "get", Path: "/other"}}, map[string]any{"Problem": map[string]any{}})
	return nil
}
