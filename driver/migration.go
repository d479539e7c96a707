package driver

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

var migrationFileRE = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.(up|down)\.sql$`)

func readMigrations(fsys fs.FS, replace func(string) string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, entry := range entries {
		match := migrationFileRE.FindStringSubmatch(entry.Name())
		if match == nil {
			continue
		}
		version, _ := strconv.Atoi(match[1])
		body, err := fs.ReadFile(fsys, path.Clean(entry.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", entry.Name(), err)
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: match[2]}
			byVersion[version] = m
		}
		if m.Name != match[2] {
			return nil, fmt.Errorf("migration %03d has two names: %q and %q", version, m.Name, match[2])
		}
		text := string(body)
		if replace != nil {
			text = replace(text)
		}
		if match[3] == "up" {
			m.Up = text
		} else {
			m.Down = text
		}
	}
	migrations := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %03d_%s needs both an up and a down file", m.Version, m.Name)
		}
		migrations = append(migrations, *m)
	}
	sort.Slice(migrations, func(i, j int) bool { return migrations[i].Version < migrations[j].Version })
	for i, m := range migrations {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations must be numbered 001, 002, ... without gaps; found %03d at position %d", m.Version, i+1)
		}
	}
	return migrations, nil
}
