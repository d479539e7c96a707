package console

// Internals the external tests (package console_test) look at.

// ExportShortID is shortID.
func ExportShortID(v any) string { return shortID(v) }

// ExportSampleCount is how many samples the console's sampler holds.
func ExportSampleCount(c *Console) int { return len(c.sampler.samples()) }

// Regions the tests check.
var (
	ExportOverviewRegions = overviewRegions
	ExportProcessRegions  = processRegions
)
