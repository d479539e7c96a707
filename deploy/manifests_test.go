package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/yannh/kubeconform/pkg/resource"
	"github.com/yannh/kubeconform/pkg/validator"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/deploy/internal/k8sschema"
)

// overlays are the Kustomize overlays a cluster applies, with the kinds each must render.
var overlays = map[string]map[string]int{
	"split": {
		"Deployment": 3, "Service": 3, "HorizontalPodAutoscaler": 2, "PodDisruptionBudget": 3,
		"NetworkPolicy": 5, "Secret": 2, "ConfigMap": 2, "Job": 1, "ServiceAccount": 1,
	},
	"multipurpose": {
		"Deployment": 2, "Service": 2, "HorizontalPodAutoscaler": 2, "PodDisruptionBudget": 2,
		"NetworkPolicy": 5, "Secret": 2, "ConfigMap": 2, "Job": 1, "ServiceAccount": 1,
	},
	"openshift": {
		"Deployment": 3, "Service": 3, "HorizontalPodAutoscaler": 2, "PodDisruptionBudget": 3,
		"NetworkPolicy": 5, "Secret": 2, "ConfigMap": 2, "Job": 1, "ServiceAccount": 1, "Route": 1,
	},
}

// renderedResource is one resource of a rendered overlay.
type renderedResource struct {
	kind, name string
	yaml       []byte
}

// render builds an overlay with kustomize, as `kubectl apply -k` would.
func render(t *testing.T, overlay string) []renderedResource {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("kubernetes", "overlays", overlay))
	require.NoError(t, err, "kustomize build kubernetes/overlays/%s", overlay)
	var out []renderedResource
	for _, r := range resMap.Resources() {
		data, err := r.AsYAML()
		require.NoError(t, err)
		out = append(out, renderedResource{kind: r.GetKind(), name: r.GetName(), yaml: data})
	}
	return out
}

// newValidator validates against the vendored schemas only: a kind without a schema is an error,
// never skipped.
func newValidator(t *testing.T) validator.Validator {
	t.Helper()
	dir, err := filepath.Abs("schemas")
	require.NoError(t, err)
	v, err := validator.New([]string{dir + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"}, validator.Opts{Strict: true, KubernetesVersion: "1.34.0"})
	require.NoError(t, err)
	return v
}

func TestOverlaysRenderAndValidate(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	for overlay, wantKinds := range overlays {
		t.Run(overlay, func(t *testing.T) {
			resources := render(t, overlay)
			kinds := map[string]int{}
			for _, r := range resources {
				kinds[r.kind]++
				result := v.ValidateResource(resource.Resource{Path: r.kind + "/" + r.name, Bytes: r.yaml})
				require.Equal(t, validator.Valid, result.Status, "%s/%s: %v %v\n%s", r.kind, r.name, result.Err, result.ValidationErrors, r.yaml)
			}
			require.Equal(t, wantKinds, kinds, "the kinds rendered by overlay %s", overlay)
		})
	}
}

// TestReplicasOwnedOnce checks that a Deployment an HPA scales leaves replicas to it (an apply
// would otherwise reset the count on every rollout), and that the others, the rate-limited
// workers above all, state theirs.
func TestReplicasOwnedOnce(t *testing.T) {
	t.Parallel()
	for overlay := range overlays {
		scaled := map[string]bool{}
		var deployments []appsv1.Deployment
		for _, r := range render(t, overlay) {
			switch r.kind {
			case "HorizontalPodAutoscaler":
				var hpa autoscalingv2.HorizontalPodAutoscaler
				require.NoError(t, yaml.Unmarshal(r.yaml, &hpa))
				require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
				scaled[hpa.Spec.ScaleTargetRef.Name] = true
			case "Deployment":
				var d appsv1.Deployment
				require.NoError(t, yaml.Unmarshal(r.yaml, &d))
				deployments = append(deployments, d)
			}
		}
		for _, d := range deployments {
			if scaled[d.Name] {
				require.Nil(t, d.Spec.Replicas, "%s/%s: the HPA owns replicas", overlay, d.Name)
			} else {
				require.NotNil(t, d.Spec.Replicas, "%s/%s: no HPA, so the manifest states replicas", overlay, d.Name)
			}
		}
		require.False(t, scaled["ratelimited-worker"], "the rate-limited workers' replicas are the rate limit: no HPA")
	}
}

func TestValidationRejectsWrongManifests(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	var deployment []byte
	for _, r := range render(t, "split") {
		if r.kind == "Deployment" && r.name == "ratelimited-worker" {
			deployment = r.yaml
		}
	}
	require.NotNil(t, deployment)
	require.Equal(t, validator.Valid, v.ValidateResource(resource.Resource{Path: "good", Bytes: deployment}).Status)

	tests := []struct {
		name      string
		old, new  string
		wantError string
	}{
		{"unknown container field", "        name: worker\n", "        name: worker\n        imagePullPolice: Always\n", "imagePullPolice"},
		{"replicas as a string", "replicas: 3", "replicas: three", "replicas"},
		{"bad quantity", "memory: 256Mi", "memory: 256 MB", "memory"},
		{"unknown spec field", "  replicas: 3\n", "  replicas: 3\n  replica: 3\n", "replica"},
		{"wrong apiVersion", "apiVersion: apps/v1", "apiVersion: apps/v1beta1", "could not find schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, string(deployment), tt.old)
			bad := strings.Replace(string(deployment), tt.old, tt.new, 1)
			result := v.ValidateResource(resource.Resource{Path: "bad", Bytes: []byte(bad)})
			require.NotEqual(t, validator.Valid, result.Status, "the wrong manifest passed:\n%s", bad)
			require.Error(t, result.Err)
			t.Logf("rejected: %v", result.Err)
			require.Contains(t, result.Err.Error(), tt.wantError)
		})
	}

	t.Run("missing required field", func(t *testing.T) {
		// A container without a name.
		bad := strings.Replace(string(deployment), "        name: worker\n", "", 1)
		result := v.ValidateResource(resource.Resource{Path: "bad", Bytes: []byte(bad)})
		require.Equal(t, validator.Invalid, result.Status, "%v", result.Err)
		require.Contains(t, result.Err.Error(), "name")
	})
}

// envOf returns the literal environment of a container, as KEY=VALUE entries.
func envOf(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out = append(out, e.Name+"="+e.Value)
		}
	}
	return out
}

// TestWorkerProfilesMatchExamples checks that each worker Deployment, its ConfigMap plus its
// COMMANDBUS_* environment, configures what its profile in examples/profiles does.
func TestWorkerProfilesMatchExamples(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, overlay := range []string{"split", "multipurpose"} {
		var configYAML string
		var deployments []appsv1.Deployment
		for _, r := range render(t, overlay) {
			switch r.kind {
			case "ConfigMap":
				var cm corev1.ConfigMap
				require.NoError(t, yaml.Unmarshal(r.yaml, &cm))
				if data, ok := cm.Data["commandbus.yml"]; ok {
					configYAML = data
				}
			case "Deployment":
				var d appsv1.Deployment
				require.NoError(t, yaml.Unmarshal(r.yaml, &d))
				deployments = append(deployments, d)
			}
		}
		require.NotEmpty(t, configYAML)
		for _, d := range deployments {
			c := d.Spec.Template.Spec.Containers[0]
			if c.Args[0] != "worker" {
				continue
			}
			require.Equal(t, []string{"worker", "--config", "/etc/commandbus/commandbus.yml", "--metrics-addr", ":9090"}, c.Args)
			got, err := config.Parse([]byte(configYAML), append(envOf(c), "COMMANDBUS_DATABASE_URL=postgres://db/payments"))
			require.NoError(t, err, "%s: the ConfigMap with the Deployment's environment", d.Name)
			want, err := config.Load(filepath.Join("..", "examples", "profiles", d.Name+".yml"))
			require.NoError(t, err)
			gotCfg, wantCfg := got.WithDefaults().Config, want.WithDefaults().Config
			require.Equal(t, wantCfg.Features, gotCfg.Features, "%s: features", d.Name)
			require.Equal(t, wantCfg.Domains, gotCfg.Domains, "%s: domains", d.Name)
			if *wantCfg.Features.ProcessExecution {
				// The steps are read only where processes run; the shared ConfigMap has them for all.
				require.Equal(t, wantCfg.CommandSteps, gotCfg.CommandSteps, "%s: command steps", d.Name)
			}
			seen[d.Name] = true
		}
	}
	require.Equal(t, map[string]bool{"ratelimited-worker": true, "payments-worker": true, "multipurpose-worker": true}, seen)
}

// TestServeConfigIsValid checks that serve's configuration file (its ConfigMap) holds no secret
// and, with the Deployment's environment and the tokens file of its Secret mounted where the
// environment names it, passes the loader's validation, placeholder tokens included.
func TestServeConfigIsValid(t *testing.T) {
	t.Parallel()
	var (
		cm     corev1.ConfigMap
		tokens corev1.Secret
		deploy appsv1.Deployment
	)
	for _, r := range render(t, "split") {
		switch {
		case r.kind == "ConfigMap" && r.name == "commandbus-serve":
			require.NoError(t, yaml.Unmarshal(r.yaml, &cm))
		case r.kind == "Secret" && r.name == "commandbus-serve-tokens":
			require.NoError(t, yaml.Unmarshal(r.yaml, &tokens))
		case r.kind == "Deployment" && r.name == "commandbus-serve":
			require.NoError(t, yaml.Unmarshal(r.yaml, &deploy))
		}
	}
	require.NotEmpty(t, cm.Data["serve.yml"], "the commandbus-serve ConfigMap")
	require.NotEmpty(t, tokens.StringData["tokens.yml"], "the commandbus-serve-tokens Secret")
	require.NotEmpty(t, deploy.Name, "the commandbus-serve Deployment")

	bare, err := config.Parse([]byte(cm.Data["serve.yml"]), []string{"COMMANDBUS_DATABASE_URL=postgres://db/payments"})
	require.NoError(t, err)
	require.Empty(t, bare.Server.Tokens, "no token in the ConfigMap")
	for _, secret := range []string{"CHANGE-ME", "token:"} {
		require.NotContains(t, cm.Data["serve.yml"], secret)
	}

	// The Secret is mounted where COMMANDBUS_SERVER_TOKENS_FILE points.
	c := deploy.Spec.Template.Spec.Containers[0]
	var tokensFile string
	for _, e := range c.Env {
		if e.Name == "COMMANDBUS_SERVER_TOKENS_FILE" {
			tokensFile = e.Value
		}
	}
	require.NotEmpty(t, tokensFile, "serve's environment names its tokens file")
	var mountPath string
	for _, m := range c.VolumeMounts {
		for _, v := range deploy.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == tokens.Name {
				require.True(t, m.ReadOnly)
				mountPath = m.MountPath
			}
		}
	}
	require.Equal(t, mountPath, filepath.Dir(tokensFile), "the tokens Secret is mounted where the environment points")
	_, key := filepath.Split(tokensFile)
	require.Contains(t, tokens.StringData, key)

	local := filepath.Join(t.TempDir(), key)
	require.NoError(t, os.WriteFile(local, []byte(tokens.StringData[key]), 0o600))
	env := []string{"COMMANDBUS_DATABASE_URL=postgres://db/payments", "COMMANDBUS_SERVER_TOKENS_FILE=" + local}
	for _, e := range envOf(c) {
		if !strings.HasPrefix(e, "COMMANDBUS_SERVER_TOKENS_FILE=") {
			env = append(env, e)
		}
	}
	file, err := config.Parse([]byte(cm.Data["serve.yml"]), env)
	require.NoError(t, err)
	require.Equal(t, ":8080", file.Server.Addr)
	require.Len(t, file.Server.Tokens, 2)
	roles := map[string]string{}
	for _, tok := range file.Server.Tokens {
		roles[tok.Subject] = tok.Role
	}
	require.Equal(t, map[string]string{"operations": "operator", "dashboards": "viewer"}, roles)
}

// TestPodsRunRestricted checks what OpenShift's restricted-v2 SCC and a read-only root
// filesystem need of every pod: non-root without a fixed UID, no privilege escalation, every
// capability dropped, /tmp on an emptyDir, and the probes and resource requests.
func TestPodsRunRestricted(t *testing.T) {
	t.Parallel()
	var resources []renderedResource
	for overlay := range overlays {
		resources = append(resources, render(t, overlay)...)
	}
	for _, r := range resources {
		var template corev1.PodTemplateSpec
		switch r.kind {
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, yaml.Unmarshal(r.yaml, &d))
			template = d.Spec.Template
		case "Job":
			var j struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, yaml.Unmarshal(r.yaml, &j))
			template = j.Spec.Template
		default:
			continue
		}
		spec := template.Spec
		name := r.kind + "/" + r.name
		// The NetworkPolicies select the pods by this label.
		require.Equal(t, "commandbus", template.Labels["app.kubernetes.io/part-of"], name)
		require.NotNil(t, spec.SecurityContext, name)
		require.True(t, *spec.SecurityContext.RunAsNonRoot, name)
		require.Nil(t, spec.SecurityContext.RunAsUser, "%s: OpenShift assigns the UID", name)
		require.False(t, *spec.AutomountServiceAccountToken, name)
		require.True(t, slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "tmp" && v.EmptyDir != nil }), name)
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			require.NotNil(t, sc, name)
			require.Nil(t, sc.RunAsUser, name)
			require.True(t, *sc.ReadOnlyRootFilesystem, name)
			require.False(t, *sc.AllowPrivilegeEscalation, name)
			require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, name)
			require.True(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "tmp" && m.MountPath == "/tmp" }), name)
			require.NotEmpty(t, c.Resources.Requests, name)
			require.True(t, strings.HasPrefix(c.Image, "registry.example.com/payments/commandbus:"), "%s: image %s", name, c.Image)
			if r.kind == "Deployment" {
				require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, name)
				require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, name)
			}
		}
	}
}

func TestSchemasAreGenerated(t *testing.T) {
	t.Parallel()
	for _, kind := range k8sschema.Kinds {
		want, err := k8sschema.Generate(kind)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("schemas", kind.FileName()))
		require.NoError(t, err, "run `go run ./cmd/genschemas` in deploy/")
		require.True(t, bytes.Equal(want, got), "schemas/%s is stale: run `go run ./cmd/genschemas` in deploy/", kind.FileName())
	}
	entries, err := os.ReadDir("schemas")
	require.NoError(t, err)
	require.Len(t, entries, len(k8sschema.Kinds), "a schema in schemas/ that no kind generates")
}
