package server

// Internals the external tests (package server_test) look at.

// ExportProcessTSQActions are the process queue's actions, in the document's order.
var ExportProcessTSQActions = processTSQActions
