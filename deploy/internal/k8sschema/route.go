package k8sschema

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The OpenShift Route (route.openshift.io/v1), written by hand from the type definitions of
// github.com/openshift/api/route/v1, whose module the Go proxy does not serve at a tagged version.
// Only the fields a Route's author writes are typed; status is any object, as the router writes
// it. Optional fields carry omitempty here so that they are not required.

// Route exposes a Service at a host name through the OpenShift router.
type Route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired route.
	Spec RouteSpec `json:"spec"`
	// Status is written by the router.
	Status map[string]any `json:"status,omitempty"`
}

// RouteSpec is the desired state of a Route.
type RouteSpec struct {
	Host              string                 `json:"host,omitempty"`
	Subdomain         string                 `json:"subdomain,omitempty"`
	Path              string                 `json:"path,omitempty"`
	To                RouteTargetReference   `json:"to"`
	AlternateBackends []RouteTargetReference `json:"alternateBackends,omitempty"`
	Port              *RoutePort             `json:"port,omitempty"`
	TLS               *TLSConfig             `json:"tls,omitempty"`
	WildcardPolicy    string                 `json:"wildcardPolicy,omitempty"`
	HTTPHeaders       map[string]any         `json:"httpHeaders,omitempty"`
}

// RouteTargetReference names the Service a Route sends traffic to.
type RouteTargetReference struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Weight *int32 `json:"weight,omitempty"`
}

// RoutePort names the Service port a Route targets.
type RoutePort struct {
	TargetPort intstr.IntOrString `json:"targetPort"`
}

// TLSConfig says how a Route terminates TLS.
type TLSConfig struct {
	Termination                   string                       `json:"termination"`
	Certificate                   string                       `json:"certificate,omitempty"`
	Key                           string                       `json:"key,omitempty"`
	CACertificate                 string                       `json:"caCertificate,omitempty"`
	DestinationCACertificate      string                       `json:"destinationCACertificate,omitempty"`
	InsecureEdgeTerminationPolicy string                       `json:"insecureEdgeTerminationPolicy,omitempty"`
	ExternalCertificate           *corev1.LocalObjectReference `json:"externalCertificate,omitempty"`
}
