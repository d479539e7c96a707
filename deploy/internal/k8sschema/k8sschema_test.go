package k8sschema_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/deploy/internal/k8sschema"
)

func TestFileName(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"ConfigMap":               "configmap-v1.json",
		"Deployment":              "deployment-apps-v1.json",
		"HorizontalPodAutoscaler": "horizontalpodautoscaler-autoscaling-v2.json",
		"NetworkPolicy":           "networkpolicy-networking-v1.json",
		"Route":                   "route-route-v1.json",
	}
	for _, kind := range k8sschema.Kinds {
		if name, ok := want[kind.Kind]; ok {
			require.Equal(t, name, kind.FileName())
		}
	}
}

func TestGenerateIsStrict(t *testing.T) {
	t.Parallel()
	for _, kind := range k8sschema.Kinds {
		data, err := k8sschema.Generate(kind)
		require.NoError(t, err)
		var schema struct {
			AdditionalProperties *bool                      `json:"additionalProperties"`
			Required             []string                   `json:"required"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Definitions          map[string]struct {
				Type                 string `json:"type"`
				AdditionalProperties *bool  `json:"additionalProperties"`
			} `json:"definitions"`
		}
		require.NoError(t, json.Unmarshal(data, &schema))
		require.NotNil(t, schema.AdditionalProperties, kind.Kind)
		require.False(t, *schema.AdditionalProperties, kind.Kind)
		require.Subset(t, schema.Required, []string{"apiVersion", "kind", "metadata"}, kind.Kind)
		require.Contains(t, string(schema.Properties["apiVersion"]), `"`+kind.APIVersion+`"`)
		for name, def := range schema.Definitions {
			if def.Type == "object" && def.AdditionalProperties != nil {
				require.False(t, *def.AdditionalProperties, "%s: %s accepts unknown fields", kind.Kind, name)
			}
		}
	}
}
