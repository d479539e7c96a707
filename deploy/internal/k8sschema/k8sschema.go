// Package k8sschema writes the JSON schemas kubeconform validates the manifests against. They
// are generated from the Go API types of k8s.io/api (the types the API server itself decodes),
// because the published schemas cannot be downloaded where CI runs.
//
// The schemas are strict: every object rejects a field its Go type does not have, so a misspelt
// key (imagePullPolice) fails validation as it would fail `kubectl apply --validate=strict`. A
// field is required when its JSON tag has no omitempty, as the Kubernetes OpenAPI generator
// decides. Types that marshal themselves get the shape they marshal to: a quantity is a string
// such as 500m or a number, an int-or-string either, a time an RFC 3339 string.
package k8sschema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Kind is one resource kind to write a schema for: its apiVersion, kind and Go type.
type Kind struct {
	// APIVersion is the group/version, e.g. apps/v1 (v1 for the core group).
	APIVersion string
	// Kind is the resource's kind, e.g. Deployment.
	Kind string
	// Type is the Go struct the kind decodes into.
	Type reflect.Type
}

// FileName is the name kubeconform looks the schema up by with the location template
// "{{ .ResourceKind }}{{ .KindSuffix }}.json": the lower-cased kind, then the first label of
// the group, then the version (deployment-apps-v1.json, route-route-v1.json, secret-v1.json).
func (k Kind) FileName() string {
	name := strings.ToLower(k.Kind)
	group, version, found := strings.Cut(k.APIVersion, "/")
	if !found {
		return name + "-" + strings.ToLower(group) + ".json"
	}
	first, _, _ := strings.Cut(group, ".")
	return name + "-" + strings.ToLower(first) + "-" + strings.ToLower(version) + ".json"
}

// Kinds are the resource kinds the manifests under deploy/kubernetes use.
var Kinds = []Kind{
	{"v1", "ConfigMap", reflect.TypeFor[corev1.ConfigMap]()},
	{"v1", "Secret", reflect.TypeFor[corev1.Secret]()},
	{"v1", "Service", reflect.TypeFor[corev1.Service]()},
	{"v1", "ServiceAccount", reflect.TypeFor[corev1.ServiceAccount]()},
	{"apps/v1", "Deployment", reflect.TypeFor[appsv1.Deployment]()},
	{"batch/v1", "Job", reflect.TypeFor[batchv1.Job]()},
	{"autoscaling/v2", "HorizontalPodAutoscaler", reflect.TypeFor[autoscalingv2.HorizontalPodAutoscaler]()},
	{"policy/v1", "PodDisruptionBudget", reflect.TypeFor[policyv1.PodDisruptionBudget]()},
	{"networking.k8s.io/v1", "NetworkPolicy", reflect.TypeFor[networkingv1.NetworkPolicy]()},
	{"route.openshift.io/v1", "Route", reflect.TypeFor[Route]()},
}

// quantityPattern is the Kubernetes quantity syntax (a decimal with an optional suffix or
// exponent), so that a typo such as "500 m" fails validation.
const quantityPattern = `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`

// Generate returns the schema of kind as indented JSON, ending with a newline. The output is
// deterministic: the same types give the same bytes.
func Generate(kind Kind) ([]byte, error) {
	g := &generator{definitions: map[string]any{}}
	root := g.structSchema(kind.Type)
	props := root["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"type": "string", "enum": []string{kind.APIVersion}}
	props["kind"] = map[string]any{"type": "string", "enum": []string{kind.Kind}}
	root["required"] = mergeRequired(root["required"], "apiVersion", "kind", "metadata")
	root["description"] = fmt.Sprintf("%s %s, generated from the Go type %s by deploy/internal/k8sschema.", kind.APIVersion, kind.Kind, kind.Type)
	if len(g.definitions) > 0 {
		root["definitions"] = g.definitions
	}
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

type generator struct {
	definitions map[string]any
}

func mergeRequired(existing any, names ...string) []string {
	set := map[string]bool{}
	if list, ok := existing.([]string); ok {
		for _, n := range list {
			set[n] = true
		}
	}
	for _, n := range names {
		set[n] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// schema returns the schema of a value of type t: inline for scalars, lists and maps, a $ref to
// a definition for a struct.
func (g *generator) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return map[string]any{"type": []string{"string", "number"}, "pattern": quantityPattern}
	case reflect.TypeFor[intstr.IntOrString]():
		return map[string]any{"type": []string{"string", "integer"}}
	case reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]():
		// kubectl writes creationTimestamp: null into objects it never sent.
		return map[string]any{"type": []string{"string", "null"}, "format": "date-time"}
	case reflect.TypeFor[metav1.Duration]():
		return map[string]any{"type": "string"}
	case reflect.TypeFor[runtime.RawExtension](), reflect.TypeFor[metav1.FieldsV1]():
		return map[string]any{} // any JSON value
	}
	if t.Kind() == reflect.Struct && (t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)) {
		return map[string]any{} // marshals itself: its shape is not its fields
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"} // base64, as encoding/json writes []byte
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := definitionName(t)
		if _, ok := g.definitions[name]; !ok {
			g.definitions[name] = nil // reserved: a recursive type refers to itself
			g.definitions[name] = g.structSchema(t)
		}
		return map[string]any{"$ref": "#/definitions/" + name}
	case reflect.Interface:
		return map[string]any{}
	}
	panic(fmt.Sprintf("k8sschema: no schema for %s (%s)", t, t.Kind()))
}

// definitionName names a struct's definition by its package path and name, with dots only so
// that it needs no escaping in a JSON pointer: k8s.io.api.core.v1.PodSpec.
func definitionName(t reflect.Type) string {
	return strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
}

// structSchema is the closed object schema of struct t: its JSON fields, embedded inline
// structs flattened, required where the tag has no omitempty.
func (g *generator) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	g.addFields(t, props, &required)
	out := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out
}

func (g *generator) addFields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.addFields(ft, props, required)
				continue
			}
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}
