package server

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/driver"
)

var (
	timeType    = reflect.TypeFor[time.Time]()
	uuidType    = reflect.TypeFor[uuid.UUID]()
	rawType     = reflect.TypeFor[json.RawMessage]()
	decimalType = reflect.TypeFor[decimal.Decimal]()
	anyType     = reflect.TypeFor[any]()

	schemaProviderType = reflect.TypeFor[schemaProvider]()
)

// schemaProvider is a type that encodes itself and says how (money.Amount does).
type schemaProvider interface{ OpenAPISchema() map[string]any }

// schemaOf derives the OpenAPI schema of a response type from its Go definition and JSON tags,
// so the document cannot drift from what the handlers encode: a field without omitempty or
// omitzero is always sent, so it is required; a pointer without them may be null.
// logEntryType encodes itself: its fields plus latencyMs, as logEntrySchema describes.
var logEntryType = reflect.TypeFor[driver.ExecutionLogEntry]()

// plainLogEntry is an execution log entry's fields, without its own encoding.
type plainLogEntry driver.ExecutionLogEntry

// logEntrySchema is what an execution log entry encodes to.
type logEntrySchema struct {
	plainLogEntry
	LatencyMs *float64 `json:"latencyMs,omitempty"`
}

func schemaOf[T any]() object { return schemaFor(reflect.TypeFor[T](), false) }

// requestSchemaOf derives the schema of a request body type: fields without omitempty are
// required, and no other property is allowed (the handlers refuse unknown fields).
func requestSchemaOf[T any]() object { return schemaFor(reflect.TypeFor[T](), true) }

func schemaFor(t reflect.Type, request bool) object {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType:
		return object{"type": "string", "format": "date-time"}
	case uuidType:
		return object{"type": "string", "format": "uuid"}
	case decimalType:
		return object{"type": "string", "format": "decimal", "pattern": `^-?[0-9]+(\.[0-9]+)?$`}
	case rawType, anyType:
		return object{"description": "any JSON value"}
	case logEntryType:
		return schemaFor(reflect.TypeFor[logEntrySchema](), request)
	}
	if t.Implements(schemaProviderType) {
		return reflect.Zero(t).Interface().(schemaProvider).OpenAPISchema()
	}
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || t.Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
		panic(fmt.Sprintf("openapi: %s encodes itself; give it a schema in schemaFor", t))
	}
	switch t.Kind() {
	case reflect.String:
		return object{"type": "string"}
	case reflect.Bool:
		return object{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return object{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return object{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return object{"type": "number"}
	case reflect.Slice, reflect.Array:
		return object{"type": "array", "items": schemaFor(t.Elem(), request)}
	case reflect.Map:
		return object{"type": "object", "additionalProperties": schemaFor(t.Elem(), request)}
	case reflect.Struct:
		properties := object{}
		var required []string
		addProperties(t, properties, &required, request)
		schema := object{"type": "object", "properties": properties}
		if len(required) > 0 {
			schema["required"] = required
		}
		if request {
			schema["additionalProperties"] = false
		}
		return schema
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

// addProperties adds the JSON properties of struct t, flattening embedded structs as
// encoding/json does.
func addProperties(t reflect.Type, properties object, required *[]string, request bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, options, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			embedded := f.Type
			if embedded.Kind() == reflect.Pointer {
				embedded = embedded.Elem()
			}
			if embedded.Kind() == reflect.Struct {
				addProperties(embedded, properties, required, request)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		schema := schemaFor(f.Type, request)
		optional := strings.Contains(options, "omitempty") || strings.Contains(options, "omitzero")
		if !optional {
			*required = append(*required, name)
			if !request && canBeNull(f.Type) {
				schema["nullable"] = true
			}
		}
		properties[name] = schema
	}
}

// canBeNull reports whether encoding/json may write null for a value of t.
func canBeNull(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Interface:
		return true
	}
	// Slices are left out on purpose: a list the API sends is [] when empty, never null, and
	// the document says so.
	return false
}

// annotate adds descriptions, formats, enums and bounds to the properties of a derived schema.
// It panics on a property the schema does not have, so an annotation cannot outlive its field.
func annotate(schema object, properties map[string]object) object {
	props := schema["properties"].(object)
	for name, extra := range properties {
		target, ok := props[name].(object)
		if !ok {
			panic(fmt.Sprintf("openapi: annotation for %q, which the type does not have", name))
		}
		if _, isRef := extra["$ref"]; isRef {
			props[name] = extra // a named schema replaces the derived one
			continue
		}
		for k, v := range extra {
			target[k] = v
		}
	}
	return schema
}
