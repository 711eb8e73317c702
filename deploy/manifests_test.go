package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The Kubernetes base, relative to this package's directory.
const (
	kubeDir       = "kubernetes"
	kubeNamespace = "llm-router"
	// kustomizationFile is the name kustomize looks for in a directory.
	kustomizationFile = "kustomization.yaml"
	// secretExample documents the Secret operators create; no kustomization
	// lists it, on purpose.
	secretExample = "kubernetes/secret.example.yaml"
)

// kinds are the Kubernetes API types the manifests may use, by apiVersion
// and kind. A document of any other kind fails the tests: add its type here
// when a manifest needs it, so that it is decoded strictly too.
// Kustomizations are not API objects: decodeKustomization reads them.
var kinds = map[string]func() any{
	"apps/v1 Deployment":                 func() any { return new(appsv1.Deployment) },
	"apps/v1 StatefulSet":                func() any { return new(appsv1.StatefulSet) },
	"v1 Service":                         func() any { return new(corev1.Service) },
	"v1 ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1 Secret":                          func() any { return new(corev1.Secret) },
	"v1 ServiceAccount":                  func() any { return new(corev1.ServiceAccount) },
	"v1 Namespace":                       func() any { return new(corev1.Namespace) },
	"policy/v1 PodDisruptionBudget":      func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1 NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
}

// decodeObject decodes one manifest document strictly into the Kubernetes
// type its apiVersion and kind name: an unknown or misspelt field, a
// duplicate key or a wrong type is an error, as is an unsupported kind.
func decodeObject(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	key := tm.APIVersion + " " + tm.Kind
	newObj, ok := kinds[key]
	if !ok {
		return nil, fmt.Errorf("unsupported apiVersion/kind %q (supported: %s)", key, strings.Join(supportedKinds(), ", "))
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return obj, nil
}

func supportedKinds() []string {
	var out []string
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// kustomization is the part of kustomize's Kustomization the files use,
// decoded strictly: a field kustomize would read but this struct lacks
// fails the test until it is added here (and checked).
type kustomization struct {
	APIVersion         string               `json:"apiVersion"`
	Kind               string               `json:"kind"`
	Namespace          string               `json:"namespace"`
	Resources          []string             `json:"resources"`
	ConfigMapGenerator []configMapGenerator `json:"configMapGenerator"`
}

type configMapGenerator struct {
	Name    string           `json:"name"`
	Files   []string         `json:"files"`
	Options generatorOptions `json:"options"`
}

type generatorOptions struct {
	Labels                map[string]string `json:"labels"`
	DisableNameSuffixHash bool              `json:"disableNameSuffixHash"`
}

// file returns the key and the path, relative to the kustomization's
// directory, of a generator's files entry ("key=path" or "path").
func generatorFile(entry string) (key, file string) {
	if k, f, ok := strings.Cut(entry, "="); ok {
		return k, f
	}
	return path.Base(entry), entry
}

func decodeKustomization(doc []byte) (kustomization, error) {
	var k kustomization
	if err := yaml.UnmarshalStrict(doc, &k); err != nil {
		return k, err
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return k, fmt.Errorf("apiVersion/kind %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	return k, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitDocuments splits a multi-document YAML file, dropping documents that
// hold nothing but comments.
func splitDocuments(b []byte) ([][]byte, error) {
	var out [][]byte
	for _, doc := range docSeparator.Split(string(b), -1) {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return nil, err
		}
		if v != nil {
			out = append(out, []byte(doc))
		}
	}
	return out, nil
}

// manifest is one decoded document and where it came from.
type manifest struct {
	where string // file#index, relative to deploy/
	file  string
	obj   any
}

// manifestSet is everything under deploy/kubernetes and the kustomizations.
type manifestSet struct {
	objects        []manifest
	kustomizations map[string]kustomization // by directory, relative to deploy/
	dataFiles      map[string]bool          // files configMapGenerators read
}

// loadManifests walks deploy/kubernetes, decodes every kustomization.yaml
// (and the one at deploy/) strictly, and every other YAML file that no
// generator reads as data, document by document, strictly into its API
// type.
func loadManifests(t *testing.T) manifestSet {
	t.Helper()
	set := manifestSet{kustomizations: map[string]kustomization{}, dataFiles: map[string]bool{}}
	yamlFiles := []string{kustomizationFile} // deploy/'s, which includes kubernetes/
	err := filepath.WalkDir(kubeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") {
			yamlFiles = append(yamlFiles, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Kustomizations first: they say which files are data.
	for _, f := range yamlFiles {
		if path.Base(f) != kustomizationFile {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		k, err := decodeKustomization(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		set.kustomizations[path.Dir(f)] = k
		for _, g := range k.ConfigMapGenerator {
			for _, e := range g.Files {
				_, file := generatorFile(e)
				set.dataFiles[path.Clean(path.Join(path.Dir(f), file))] = true
			}
		}
	}
	for _, f := range yamlFiles {
		if path.Base(f) == kustomizationFile || set.dataFiles[f] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitDocuments(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(docs) == 0 {
			t.Errorf("%s: no document", f)
		}
		for i, doc := range docs {
			where := fmt.Sprintf("%s#%d", f, i)
			obj, err := decodeObject(doc)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			set.objects = append(set.objects, manifest{where: where, file: f, obj: obj})
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return set
}

// all returns the decoded objects of type T, by name.
func all[T any, P interface {
	*T
	GetName() string
}](set manifestSet) map[string]P {
	out := map[string]P{}
	for _, m := range set.objects {
		if o, ok := m.obj.(P); ok {
			out[o.GetName()] = o
		}
	}
	return out
}

// TestManifestsDecodeStrictly decodes every manifest and kustomization
// (loadManifests fails on any error) and checks that the base has what the
// deployment needs.
func TestManifestsDecodeStrictly(t *testing.T) {
	set := loadManifests(t)
	count := map[string]int{}
	for _, m := range set.objects {
		if _, example := m.obj.(*corev1.Secret); example && m.file != secretExample {
			t.Errorf("%s: a Secret in the base would put credentials in the repository; document it in %s", m.where, secretExample)
		}
		o, ok := m.obj.(metav1.Object)
		if !ok {
			t.Fatalf("%s: %T has no object metadata", m.where, m.obj)
		}
		if ns := o.GetNamespace(); ns != "" && ns != kubeNamespace {
			t.Errorf("%s: namespace %q, want %s (or none: the kustomization sets it)", m.where, ns, kubeNamespace)
		}
		count[fmt.Sprintf("%T", m.obj)]++
	}
	for typ, want := range map[string]int{
		"*v1.Deployment":          2, // router, Envoy
		"*v1.StatefulSet":         1, // Redis
		"*v1.Service":             4, // Envoy, ext_proc (headless), admin, Redis
		"*v1.PodDisruptionBudget": 1,
		"*v1.ServiceAccount":      1,
		"*v1.Namespace":           1,
		"*v1.Secret":              1, // the example
	} {
		if count[typ] < want {
			t.Errorf("found %d %s, want at least %d (all: %v)", count[typ], typ, want, count)
		}
	}
}

// TestStrictDecodeCatchesTypos proves the decoding above would catch a
// mistake: each case mutates a shipped document and expects an error.
func TestStrictDecodeCatchesTypos(t *testing.T) {
	deployment := firstDocument(t, "kubernetes/router-deployment.yaml", "kind: Deployment")
	kust, err := os.ReadFile("kubernetes/" + kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	routerCfg, err := os.ReadFile(routerConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeObject(deployment); err != nil {
		t.Fatalf("the unmutated Deployment must decode: %v", err)
	}
	if _, err := decodeKustomization(kust); err != nil {
		t.Fatalf("the unmutated kustomization must decode: %v", err)
	}
	if _, err := parseRouterConfig(routerCfg, nil); err != nil {
		t.Fatalf("the unmutated router config must load: %v", err)
	}
	cases := []struct {
		name, old, new string
		decode         func([]byte) error
		doc            []byte
	}{
		{"misspelt container field", "containerPort:", "containerPrt:", objectErr, deployment},
		{"misspelt spec field", "  replicas:", "  replica:", objectErr, deployment},
		{"misspelt probe", "readinessProbe:", "readinesProbe:", objectErr, deployment},
		{"wrong type", "replicas: 3", "replicas: three", objectErr, deployment},
		{"duplicate key", "  replicas: 3\n", "  replicas: 3\n  replicas: 4\n", objectErr, deployment},
		{"unknown kind", "kind: Deployment", "kind: Deploymnet", objectErr, deployment},
		{"unsupported apiVersion", "apiVersion: apps/v1", "apiVersion: apps/v1beta1", objectErr, deployment},
		{"misspelt kustomization field", "configMapGenerator:", "configMapGenerater:", kustomizationErr, kust},
		{"misspelt router key", "shutdown_delay:", "shutdown_dealy:", routerConfigErr, routerCfg},
		{"misspelt nested router key", "  discovery: xds", "  discovry: xds", routerConfigErr, routerCfg},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(c.doc, []byte(c.old)) {
				t.Fatalf("the document no longer contains %q: update the case", c.old)
			}
			mutated := bytes.Replace(c.doc, []byte(c.old), []byte(c.new), 1)
			if err := c.decode(mutated); err == nil {
				t.Fatalf("replacing %q by %q decoded without error", c.old, c.new)
			} else {
				t.Log(err)
			}
		})
	}
}

func objectErr(b []byte) error {
	_, err := decodeObject(b)
	return err
}

func kustomizationErr(b []byte) error {
	_, err := decodeKustomization(b)
	return err
}

func routerConfigErr(b []byte) error {
	_, err := parseRouterConfig(b, nil)
	return err
}

// firstDocument returns the first document of file that contains marker.
func firstDocument(t *testing.T, file, marker string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := splitDocuments(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if bytes.Contains(d, []byte(marker)) {
			return d
		}
	}
	t.Fatalf("%s has no document with %q", file, marker)
	return nil
}
