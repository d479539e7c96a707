package server

import "net/http"

// Payments serves the reference payments platform's routes (payments, batches, approvals,
// network responses). It is implemented in cmd/commandbus over examples/payments.
type Payments interface {
	// Routes registers the payment routes; the server passes its auth wrappers.
	Routes(mux *http.ServeMux, viewer, operator func(http.HandlerFunc) http.HandlerFunc)
}

func (s *Server) paymentRoutes() {
	s.cfg.Payments.Routes(s.mux, s.viewer, s.operator)
}
