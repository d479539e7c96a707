package server

import "net/http"

// Internals the external tests (package server_test) look at.

// ExportProcessTSQActions are the process queue's actions, in the document's order.
var ExportProcessTSQActions = processTSQActions

// ObserveQueryParameters calls observe with the query parameters each request's route takes,
// until the returned stop is called.
func ObserveQueryParameters(observe func(r *http.Request, allowed []string)) (stop func()) {
	queryObserver.Store(&observe)
	return func() { queryObserver.Store(nil) }
}
