package server_test

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/dbtest"
)

// readmeExample is one ```http block of the README: a request and, when shown, the status of
// its answer.
type readmeExample struct {
	line         int
	method, path string
	headers      map[string]string
	body         string
	status       int // 0: any documented status
}

var (
	requestLine  = regexp.MustCompile(`^([A-Z]+) (\S+) HTTP/1\.1$`)
	responseLine = regexp.MustCompile(`^HTTP/1\.1 (\d{3})\b`)
)

// readmeExamples parses the ```http blocks of the README (indented blocks too).
func readmeExamples(t *testing.T, path string) []readmeExample {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []readmeExample
	var cur *readmeExample
	var indent string
	inBody, inResponse := false, false
	scanner := bufio.NewScanner(f)
	for n := 1; scanner.Scan(); n++ {
		raw := scanner.Text()
		text := strings.TrimSpace(raw)
		if cur == nil {
			if text == "```http" {
				indent = raw[:strings.Index(raw, "`")]
				cur = &readmeExample{line: n, headers: map[string]string{}}
				inBody, inResponse = false, false
			}
			continue
		}
		if text == "```" {
			require.NotEmpty(t, cur.method, "README.md:%d: the block has a request line", cur.line)
			out = append(out, *cur)
			cur = nil
			continue
		}
		line := strings.TrimPrefix(raw, indent)
		switch {
		case inResponse:
		case cur.method == "":
			m := requestLine.FindStringSubmatch(line)
			require.NotNil(t, m, "README.md:%d: want METHOD PATH HTTP/1.1, got %q", n, line)
			cur.method, cur.path = m[1], m[2]
		case responseLine.MatchString(line):
			cur.status, _ = strconv.Atoi(responseLine.FindStringSubmatch(line)[1])
			inResponse = true
		case !inBody && text == "":
			inBody = true
		case !inBody:
			name, value, ok := strings.Cut(line, ":")
			require.True(t, ok, "README.md:%d: want a header, got %q", n, line)
			cur.headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		default:
			cur.body += line + "\n"
		}
	}
	require.NoError(t, scanner.Err())
	return out
}

// Every example request of the README gets, from a real server, an answer the OpenAPI document
// describes (and the status the README shows); the request itself matches the document too.
func TestREADMEExamplesMatchTheDocument(t *testing.T) {
	t.Parallel()
	examples := readmeExamples(t, "../README.md")
	require.GreaterOrEqual(t, len(examples), 4, "the README shows example requests")

	f := setupConsole(t, dbtest.SQLite(t))
	doc := loadAPIDoc(t, f.HTTP.URL)
	for range 3 {
		f.ParkRiskCommand() // for the paged listing
	}
	tokens := strings.NewReplacer("$OPERATOR_TOKEN", operatorToken, "$VIEWER_TOKEN", viewerToken, "$TOKEN", operatorToken)
	next := ""
	for _, ex := range examples {
		require.False(t, strings.Contains(ex.path, "$NEXT") && next == "", "README.md:%d: $NEXT without a previous next", ex.line)
		path := strings.ReplaceAll(ex.path, "$NEXT", next)
		headers := map[string]string{}
		for k, v := range ex.headers {
			headers[k] = tokens.Replace(v)
		}
		var body []byte
		if strings.TrimSpace(ex.body) != "" {
			body = []byte(ex.body)
			require.True(t, json.Valid(body), "README.md:%d: the body is JSON", ex.line)
		}
		x := send(t, ex.method, f.HTTP.URL+path, body, headers)
		if ex.status != 0 {
			require.Equal(t, ex.status, x.resp.StatusCode, "README.md:%d: %s %s answered %s", ex.line, ex.method, path, x.respBody)
		} else {
			require.Less(t, x.resp.StatusCode, 300, "README.md:%d: %s %s answered %s", ex.line, ex.method, path, x.respBody)
		}
		if x.resp.StatusCode < 300 {
			doc.checkRequest(t, x)
		}
		require.True(t, doc.checkResponse(t, x), "README.md:%d: %s %s is a documented operation", ex.line, ex.method, ex.path)
		var paged struct {
			Next string `json:"next"`
		}
		if json.Unmarshal(x.respBody, &paged) == nil {
			next = paged.Next
		}
	}
}
