package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/commandbus/commandbus"
)

// EnvPrefix starts every environment variable that overrides a configuration key, as in
// COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES.
const EnvPrefix = "COMMANDBUS_"

// decoder decodes a yaml.Node tree into a File by reflection, collecting every problem
// rather than stopping at the first as yaml.v3 does for errors of custom unmarshalers.
type decoder struct {
	problems []error
	// noLines leaves line numbers out of problems: a one-line value has only line 1.
	noLines bool
}

func (d *decoder) problem(line int, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	if line > 0 && !d.noLines {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	d.problems = append(d.problems, errors.New(msg))
}

// wrapperKey is the optional top-level key a document may nest the configuration under.
const wrapperKey = "commandbus"

func (d *decoder) decodeDocument(data []byte, cfg reflect.Value) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) { // io.EOF: an empty file, which is an empty configuration
			d.problem(0, "", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.problem(0, "", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	default:
		d.problem(next.Line, "", "a configuration file holds one YAML document; remove the second one (from its ---)")
	}
	if len(doc.Content) == 0 {
		return
	}
	root := resolveAlias(doc.Content[0])
	if root.Kind == yaml.MappingNode {
		if wrapped := d.unwrap(root); wrapped != nil {
			root = wrapped
		}
	}
	d.decode(root, cfg, "")
}

// unwrap returns the value of the commandbus: key when root has one, reporting any key beside
// it, or nil when root holds the Config keys directly.
func (d *decoder) unwrap(root *yaml.Node) *yaml.Node {
	var wrapped, wrapperKeyNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if key := root.Content[i]; key.Kind == yaml.ScalarNode && key.Value == wrapperKey && wrapped == nil {
			wrapped, wrapperKeyNode = root.Content[i+1], key
		}
	}
	if wrapped == nil {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch key := root.Content[i]; {
		case key == wrapperKeyNode:
		case key.Value == wrapperKey:
			d.problem(key.Line, "", "key %q is already written on line %d", key.Value, wrapperKeyNode.Line)
		default:
			d.problem(key.Line, "", "unknown key %q beside %s: (a wrapped configuration holds only the %s key)", key.Value, wrapperKey, wrapperKey)
		}
	}
	return resolveAlias(wrapped)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = resolveAlias(n)
	if n.ShortTag() == "!!null" {
		return // an empty value leaves the default
	}
	t := v.Type()
	switch {
	case isLeafType(t):
		d.decodeLeaf(n, v, path)
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
	case t.Kind() == reflect.Struct:
		d.decodeStruct(n, v, path)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		d.decodeMap(n, v, path)
	case t.Kind() == reflect.Slice:
		d.decodeSlice(n, v, path)
	default:
		d.problem(n.Line, path, "cannot be set from a configuration file")
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	fields := yamlFields(v.Type())
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, path, "want a mapping with keys %s, got %s", fieldNames(fields), describeNode(n))
		return
	}
	var extra []yamlPair
	remain, hasRemain := remainField(fields)
	for _, pair := range d.pairs(n, path) {
		f, ok := findField(fields, pair.key.Value)
		if !ok {
			if hasRemain && resolveAlias(pair.value).Kind == yaml.MappingNode {
				extra = append(extra, pair) // process.<type> written directly: an entry of process.types
				continue
			}
			d.problem(pair.key.Line, path, "unknown key %q (known keys: %s)", pair.key.Value, fieldNames(fields))
			continue
		}
		d.decode(pair.value, v.FieldByIndex(f.index), joinPath(path, f.name))
	}
	if len(extra) == 0 {
		return
	}
	m := v.FieldByIndex(remain.index)
	if m.IsNil() {
		m.Set(reflect.MakeMap(m.Type()))
	}
	for _, pair := range extra {
		key := reflect.ValueOf(pair.key.Value).Convert(m.Type().Key())
		if m.MapIndex(key).IsValid() {
			d.problem(pair.key.Line, path, "%q is also written under %s; write it once", pair.key.Value, joinPath(path, remain.name))
			continue
		}
		elem := newMapElem(m.Type().Elem())
		d.decode(pair.value, elem, joinPath(path, pair.key.Value))
		m.SetMapIndex(key, elem)
	}
}

// remainField returns the field tagged ",remain": a map whose entries may also be written
// directly in the struct, under names that are not keys of it (process.payment as well as
// process.types.payment).
func remainField(fields []yamlField) (yamlField, bool) {
	for _, f := range fields {
		if f.remain {
			return f, true
		}
	}
	return yamlField{}, false
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, path, "want a mapping of names to settings, got %s", describeNode(n))
		return
	}
	t := v.Type()
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	for _, pair := range d.pairs(n, path) {
		elem := newMapElem(t.Elem())
		d.decode(pair.value, elem, joinPath(path, pair.key.Value))
		v.SetMapIndex(reflect.ValueOf(pair.key.Value).Convert(t.Key()), elem)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, path, "want a list, got %s", describeNode(n))
		return
	}
	items := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, items.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(items)
}

var linePrefixRE = regexp.MustCompile(`^line \d+: `)

func (d *decoder) decodeLeaf(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.problem(n.Line, path, "want %s, got %s", describeType(v.Type()), describeNode(n))
		return
	}
	decoded := reflect.New(v.Type())
	if err := n.Decode(decoded.Interface()); err != nil {
		var typeErr *yaml.TypeError
		msg := linePrefixRE.ReplaceAllString(err.Error(), "")
		if errors.As(err, &typeErr) {
			msg = fmt.Sprintf("cannot read %q as %s", n.Value, describeType(v.Type()))
			if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				msg += "; remove the quotes"
			}
		}
		d.problem(n.Line, path, "%s", msg)
		return
	}
	v.Set(decoded.Elem())
}

type yamlPair struct{ key, value *yaml.Node }

// pairs returns the entries of a mapping with merge keys (<<) expanded as YAML specifies: keys
// written in the mapping override merged ones, and earlier merged mappings override later ones.
// A key written twice, or a key that is not a plain value, is a problem.
func (d *decoder) pairs(n *yaml.Node, path string) []yamlPair {
	var explicit, merged []yamlPair
	written := make(map[string]int) // key → line
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge" {
			merged = append(merged, d.mergedPairs(value, path)...)
			continue
		}
		if key.Kind != yaml.ScalarNode {
			d.problem(key.Line, path, "want a plain key, got %s", describeNode(key))
			continue
		}
		if line, ok := written[key.Value]; ok {
			d.problem(key.Line, path, "key %q is already written on line %d", key.Value, line)
			continue
		}
		written[key.Value] = key.Line
		explicit = append(explicit, yamlPair{key, value})
	}
	var out []yamlPair
	for _, pair := range merged {
		if _, ok := written[pair.key.Value]; !ok {
			written[pair.key.Value] = pair.key.Line
			out = append(out, pair)
		}
	}
	return append(out, explicit...)
}

// mergedPairs returns the entries a merge key's value brings: one mapping or a list of them.
func (d *decoder) mergedPairs(value *yaml.Node, path string) []yamlPair {
	value = resolveAlias(value)
	switch value.Kind {
	case yaml.MappingNode:
		return d.pairs(value, path)
	case yaml.SequenceNode:
		var out []yamlPair
		seen := make(map[*yaml.Node]bool) // merging one mapping twice adds nothing; skip the work
		for _, item := range value.Content {
			item = resolveAlias(item)
			if seen[item] {
				continue
			}
			seen[item] = true
			if item.Kind != yaml.MappingNode {
				d.problem(item.Line, path, "a merge key (<<) takes a mapping or a list of mappings, got %s", describeNode(item))
				continue
			}
			out = append(out, d.pairs(item, path)...)
		}
		return out
	default:
		d.problem(value.Line, path, "a merge key (<<) takes a mapping or a list of mappings, got %s", describeNode(value))
		return nil
	}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	default:
		return "an unexpected node"
	}
}

var (
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// isLeafType reports whether a value of type t is written as a single scalar.
func isLeafType(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer {
		ptr := reflect.PointerTo(t)
		if ptr.Implements(textUnmarshalerType) || ptr.Implements(yamlUnmarshalerType) {
			return true
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func describeType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[commandbus.Duration]() {
		return "a duration (30s, PT1H or milliseconds)"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	default:
		return "a single value"
	}
}

// yamlField is a struct field settable from configuration: its YAML key and, for environment
// variables, the key's segments (concurrent-messages → CONCURRENT, MESSAGES).
type yamlField struct {
	name string
	// index reaches the field from the struct, through inlined structs (reflect's FieldByIndex).
	index []int
	// order is the field's place among the keys of its struct, for listing them as declared.
	order    int
	typ      reflect.Type
	segments []string
	// remain marks a map whose entries may also be written as unknown keys of the struct.
	remain bool
}

// yamlFields lists the fields of struct type t that configuration can set: exported and not
// tagged yaml:"-", in declaration order. A field without a yaml tag is keyed by its lower-cased
// name, as in yaml.v3. The keys of a struct field tagged yaml:",inline" (File's embedded
// commandbus.Config) are listed in its place, as keys of t.
func yamlFields(t reflect.Type) []yamlField {
	var fields []yamlField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, options, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if options == "inline" && f.Type.Kind() == reflect.Struct {
			for _, inner := range yamlFields(f.Type) {
				inner.index = append([]int{i}, inner.index...)
				inner.order = len(fields)
				fields = append(fields, inner)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields = append(fields, yamlField{
			name:     name,
			index:    f.Index,
			order:    len(fields),
			typ:      f.Type,
			segments: strings.Split(strings.ToUpper(strings.ReplaceAll(name, "-", "_")), "_"),
			remain:   options == "remain" && f.Type.Kind() == reflect.Map,
		})
	}
	return fields
}

func findField(fields []yamlField, name string) (yamlField, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return yamlField{}, false
}

func fieldNames(fields []yamlField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// newMapElem returns a settable value for a new map entry; pointer entries point to a zero
// value, so an entry written without settings (payments:) is present and not nil.
func newMapElem(t reflect.Type) reflect.Value {
	elem := reflect.New(t).Elem()
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		elem.Set(reflect.New(t.Elem()))
	}
	return elem
}

// envVar is one COMMANDBUS_ variable; segments is its name after the prefix split at '_'.
type envVar struct {
	name, value string
	segments    []string
}

// applyEnvOverrides sets every configuration key environ names and returns the problems:
// values that do not parse, and variables below a known section or key that name no key.
func applyEnvOverrides(cfg *File, environ []string) []error {
	var vars []envVar
	for _, entry := range environ {
		name, value, ok := strings.Cut(entry, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		rest := strings.ToUpper(strings.TrimPrefix(name, EnvPrefix))
		vars = append(vars, envVar{name: name, value: value, segments: strings.Split(rest, "_")})
	}
	// Sorted for a stable order of problems; stable so that a later duplicate still wins.
	sort.SliceStable(vars, func(i, j int) bool { return vars[i].name < vars[j].name })

	root := reflect.ValueOf(cfg).Elem()
	topLevel := yamlFields(root.Type())
	var problems []error
	set := map[string]string{} // key path → the variable that set it
	for _, ev := range vars {
		if !namesKnownSection(topLevel, ev.segments) {
			continue // another tool's variable, such as COMMANDBUS_TEST_DATABASE_URL
		}
		target, err := resolveEnvPath(root, ev.segments, "")
		if err != nil && len(ev.segments) > 1 && ev.segments[len(ev.segments)-1] == strings.TrimPrefix(FileSuffix, "_") {
			// COMMANDBUS_<KEY>_FILE: the key's value is the content of the file named.
			if fileTarget, fileErr := resolveEnvPath(root, ev.segments[:len(ev.segments)-1], ""); fileErr == nil {
				content, readErr := readSecretFile(ev.value)
				if readErr != nil {
					problems = append(problems, fmt.Errorf("%s: %s: %w", ev.name, fileTarget.path, readErr))
					continue
				}
				target, err, ev.value = fileTarget, nil, content
			}
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", ev.name, err))
			continue
		}
		if other, ok := set[target.path]; ok && other != ev.name {
			problems = append(problems, fmt.Errorf("%s: %s is set by %s too; set it once", ev.name, target.path, other))
			continue
		}
		set[target.path] = ev.name
		var value reflect.Value
		if target.leaf.Kind() == reflect.Slice {
			// The list's problems name their items' paths (server.tokens[0].role).
			if value, err = parseEnvList(target.leaf, target.path, ev.value); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", ev.name, err))
				continue
			}
		} else if value, err = parseEnvValue(target.leaf, ev.value); err != nil {
			problems = append(problems, fmt.Errorf("%s: %s: %w", ev.name, target.path, err))
			continue
		}
		setEnvTarget(root, target.steps, value)
	}
	return problems
}

// parseEnvList reads a list from an environment variable: a YAML sequence, in flow style on one
// line ([{subject: ci, role: viewer, token-sha256: ...}]) or, read from a file, in block style.
// Its items are decoded as the file's are, strictly.
func parseEnvList(t reflect.Type, path, s string) (reflect.Value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return reflect.Value{}, fmt.Errorf("%s: want a YAML list such as [{...}, {...}]: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	out := reflect.New(t).Elem()
	if len(doc.Content) == 0 {
		return out, nil // empty: no items
	}
	d := &decoder{noLines: !strings.Contains(strings.TrimSpace(s), "\n")}
	d.decode(doc.Content[0], out, path)
	if len(d.problems) > 0 {
		msgs := make([]string, len(d.problems))
		for i, p := range d.problems {
			msgs[i] = p.Error()
		}
		return reflect.Value{}, errors.New(strings.Join(msgs, "; "))
	}
	return out, nil
}

// namesKnownSection reports whether segments start with the segments of a top-level key.
func namesKnownSection(topLevel []yamlField, segments []string) bool {
	for _, f := range topLevel {
		if hasSegmentPrefix(segments, f.segments) {
			return true
		}
	}
	return false
}

func hasSegmentPrefix(segments, prefix []string) bool {
	if len(prefix) > len(segments) {
		return false
	}
	for i := range prefix {
		if segments[i] != prefix[i] {
			return false
		}
	}
	return true
}

// envStep is one step from a value to the key a variable sets: a struct field or a map entry.
type envStep struct {
	field []int  // the field's index, for a struct
	key   string // the entry's name, for a map
}

// envTarget is the key a variable sets: how to reach it, its YAML path and its type.
type envTarget struct {
	steps []envStep
	path  string
	leaf  reflect.Type
}

// resolveEnvPath finds the key that segments name below v, without changing v. Where a map entry
// or pointed-to struct does not exist yet, v is the zero value of its type.
func resolveEnvPath(v reflect.Value, segments []string, path string) (envTarget, error) {
	t := v.Type()
	if isLeafType(t) || (t.Kind() == reflect.Pointer && isLeafType(t.Elem())) {
		if len(segments) > 0 {
			return envTarget{}, fmt.Errorf("%s has no key %s", path, strings.Join(segments, "_"))
		}
		return envTarget{path: path, leaf: t}, nil
	}
	if t.Kind() == reflect.Slice {
		if len(segments) > 0 {
			return envTarget{}, fmt.Errorf("%s is a list, set whole as a YAML sequence ([a, b]); its items have no variables of their own", path)
		}
		return envTarget{path: path, leaf: t}, nil
	}
	if len(segments) == 0 {
		return envTarget{}, fmt.Errorf("names the section %s, not a key in it", displayPath(path))
	}
	switch t.Kind() {
	case reflect.Pointer:
		return resolveEnvPath(derefOrZero(v), segments, path)
	case reflect.Struct:
		return resolveEnvField(v, segments, path)
	case reflect.Map:
		return resolveEnvMapEntry(v, segments, path)
	default:
		return envTarget{}, fmt.Errorf("%s cannot be set from the environment", path)
	}
}

func resolveEnvField(v reflect.Value, segments []string, path string) (envTarget, error) {
	fields := yamlFields(v.Type())
	// Longest keys first, so that a key is not mistaken for a shorter key it starts with.
	sort.SliceStable(fields, func(i, j int) bool { return len(fields[i].segments) > len(fields[j].segments) })
	var firstErr error
	for _, f := range fields {
		if !hasSegmentPrefix(segments, f.segments) {
			continue
		}
		target, err := resolveEnvPath(v.FieldByIndex(f.index), segments[len(f.segments):], joinPath(path, f.name))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		target.steps = append([]envStep{{field: f.index}}, target.steps...)
		return target, nil
	}
	if firstErr != nil {
		return envTarget{}, firstErr
	}
	if remain, ok := remainField(fields); ok {
		// COMMANDBUS_PROCESS_PAYMENT_DEADLINE_ACTION sets process.types.payment, as the file's
		// process.payment does.
		if target, err := resolveEnvMapEntry(v.FieldByIndex(remain.index), segments, joinPath(path, remain.name)); err == nil {
			target.steps = append([]envStep{{field: remain.index}}, target.steps...)
			return target, nil
		}
	}
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].order < fields[j].order })
	return envTarget{}, fmt.Errorf("%s has no key %s (known keys: %s)", displayPath(path), strings.Join(segments, "_"), fieldNames(fields))
}

// resolveEnvMapEntry chooses the entry name among the leading segments: each length whose
// remaining segments name a key is a candidate; an entry already present wins, and among new
// names the shortest does (DOMAINS_FX_REPLY_CONCURRENT_MESSAGES sets fx's
// reply-concurrent-messages unless an entry fx-reply or fx_reply exists and fx does not).
func resolveEnvMapEntry(v reflect.Value, segments []string, path string) (envTarget, error) {
	t := v.Type()
	existing := make(map[string][]string) // normalized name → names present
	for _, key := range v.MapKeys() {
		name := key.String()
		norm := normalizeEnvName(name)
		existing[norm] = append(existing[norm], name)
	}
	var found, created []envTarget
	var firstErr error
	for n := 1; n <= len(segments); n++ {
		norm := normalizeEnvName(strings.Join(segments[:n], "_"))
		names := existing[norm]
		if len(names) == 0 {
			names = []string{norm}
		}
		for _, name := range names {
			elem := reflect.Zero(t.Elem())
			if cur := v.MapIndex(reflect.ValueOf(name).Convert(t.Key())); cur.IsValid() {
				elem = cur
			}
			target, err := resolveEnvPath(elem, segments[n:], joinPath(path, name))
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			target.steps = append([]envStep{{key: name}}, target.steps...)
			if len(existing[norm]) > 0 {
				found = append(found, target)
			} else {
				created = append(created, target)
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		paths := make([]string, len(found))
		for i, target := range found {
			paths[i] = target.path
		}
		return envTarget{}, fmt.Errorf("ambiguous: could set %s; rename the entries so that their names differ by more than case, '-' and '_'", strings.Join(paths, " or "))
	case len(created) > 0:
		return created[0], nil
	default:
		return envTarget{}, firstErr
	}
}

// normalizeEnvName is the form map entry names are compared in: lower case, '-' as '_'.
func normalizeEnvName(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", "_"))
}

// derefOrZero follows a pointer, giving the zero value of the pointed-to type for nil.
func derefOrZero(v reflect.Value) reflect.Value {
	if !v.IsNil() {
		return v.Elem()
	}
	return reflect.Zero(v.Type().Elem())
}

func displayPath(path string) string {
	if path == "" {
		return "the configuration"
	}
	return path
}

// parseEnvValue converts an environment variable's value to type t.
func parseEnvValue(t reflect.Type, s string) (reflect.Value, error) {
	if t.Kind() == reflect.Pointer && !isLeafType(t) {
		inner, err := parseEnvValue(t.Elem(), s)
		if err != nil {
			return reflect.Value{}, err
		}
		ptr := reflect.New(t.Elem())
		ptr.Elem().Set(inner)
		return ptr, nil
	}
	out := reflect.New(t)
	if u, ok := out.Interface().(encoding.TextUnmarshaler); ok {
		if err := u.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
			return reflect.Value{}, err
		}
		return out.Elem(), nil
	}
	trimmed := strings.TrimSpace(s)
	fail := func() (reflect.Value, error) {
		return reflect.Value{}, fmt.Errorf("cannot read %q as %s", s, describeType(t))
	}
	switch t.Kind() {
	case reflect.Bool:
		b, err := strconv.ParseBool(trimmed)
		if err != nil {
			return fail()
		}
		out.Elem().SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(trimmed, 10, t.Bits())
		if err != nil {
			return fail()
		}
		out.Elem().SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(trimmed, 10, t.Bits())
		if err != nil {
			return fail()
		}
		out.Elem().SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(trimmed, t.Bits())
		if err != nil {
			return fail()
		}
		out.Elem().SetFloat(f)
	case reflect.String:
		out.Elem().SetString(s)
	default:
		return fail()
	}
	return out.Elem(), nil
}

// setEnvTarget follows steps from v, creating map entries and pointed-to structs on the way,
// and sets the key reached to value.
func setEnvTarget(v reflect.Value, steps []envStep, value reflect.Value) {
	if len(steps) == 0 {
		v.Set(value)
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	step := steps[0]
	if v.Kind() == reflect.Struct {
		setEnvTarget(v.FieldByIndex(step.field), steps[1:], value)
		return
	}
	// A map entry is copied out, set and stored back: map elements are not addressable.
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	key := reflect.ValueOf(step.key).Convert(v.Type().Key())
	elem := reflect.New(v.Type().Elem()).Elem()
	if cur := v.MapIndex(key); cur.IsValid() {
		elem.Set(cur)
	}
	setEnvTarget(elem, steps[1:], value)
	v.SetMapIndex(key, elem)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
