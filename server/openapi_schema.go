package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
)

var (
	timeType = reflect.TypeFor[time.Time]()
	uuidType = reflect.TypeFor[uuid.UUID]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// schemaOf derives the OpenAPI schema of a response type from its Go definition and JSON tags,
// so the document cannot drift from what the handlers encode.
func schemaOf[T any]() object { return schemaFor(reflect.TypeFor[T]()) }

func schemaFor(t reflect.Type) object {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType:
		return object{"type": "string", "format": "date-time"}
	case uuidType:
		return object{"type": "string", "format": "uuid"}
	case rawType:
		return object{"description": "any JSON value"}
	}
	switch t.Kind() {
	case reflect.String:
		return object{"type": "string"}
	case reflect.Bool:
		return object{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return object{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return object{"type": "number"}
	case reflect.Slice, reflect.Array:
		return object{"type": "array", "items": schemaFor(t.Elem())}
	case reflect.Map:
		return object{"type": "object", "additionalProperties": schemaFor(t.Elem())}
	case reflect.Struct:
		properties := object{}
		addProperties(t, properties)
		return object{"type": "object", "properties": properties}
	}
	return object{}
}

// addProperties adds the JSON properties of struct t, flattening embedded structs as
// encoding/json does.
func addProperties(t reflect.Type, properties object) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			embedded := f.Type
			if embedded.Kind() == reflect.Pointer {
				embedded = embedded.Elem()
			}
			if embedded.Kind() == reflect.Struct {
				addProperties(embedded, properties)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		properties[name] = schemaFor(f.Type)
	}
}
