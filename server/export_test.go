package server

// Internals the external tests (package server_test) look at.

// ExportShortID is shortID.
func ExportShortID(v any) string { return shortID(v) }

// ExportSampleCount is how many samples the console's sampler holds.
func ExportSampleCount(s *Server) int { return len(s.console.sampler.samples()) }

// Regions and actions the tests check.
var (
	ExportOverviewRegions   = overviewRegions
	ExportProcessRegions    = processRegions
	ExportProcessTSQActions = processTSQActions
)
