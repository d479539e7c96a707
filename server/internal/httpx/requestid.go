package httpx

import (
	"context"
	"net/http"

	"github.com/google/uuid"
)

// RequestIDHeader carries a request's id: a client or proxy may send one, the server answers
// with the id it used.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLength bounds an id taken from a client.
const maxRequestIDLength = 128

type requestIDKey struct{}

// WithRequestID returns ctx carrying a request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the id of the request r, or "" outside the server's request handling.
func RequestID(r *http.Request) string { return RequestIDFrom(r.Context()) }

// RequestIDFrom is the request id ctx carries, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogID is the request id of ctx for a log line and the answer that points to it: the request's
// own, or a new one when ctx carries none (a handler served without the server's middleware).
func LogID(ctx context.Context) string {
	if id := RequestIDFrom(ctx); id != "" {
		return id
	}
	return uuid.NewString()
}

// IncomingRequestID is the id a request brings in its X-Request-Id header when it is usable (1 to
// 128 characters of letters, digits and - _ . : /), else a new random one. An id that could
// forge log lines or carry a secret's length of data is replaced, not trusted.
func IncomingRequestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); usableRequestID(id) {
		return id
	}
	return uuid.NewString()
}

func usableRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':', c == '/':
		default:
			return false
		}
	}
	return true
}
