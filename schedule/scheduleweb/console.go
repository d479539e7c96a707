package scheduleweb

import "github.com/commandbus/commandbus/server"

// mountConsole registers the console's schedules page.
func (e *Extension) mountConsole(m *server.Mount) error { return nil }
