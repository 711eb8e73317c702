package deploy

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKustomizations checks the two kustomizations: every file they name
// exists, every manifest under deploy/kubernetes is applied by one (but
// the Secret example), the namespace, and the Grafana dashboard generated
// from its one copy in grafana/.
func TestKustomizations(t *testing.T) {
	set := loadManifests(t)
	listed := map[string]bool{}
	for dir, k := range set.kustomizations {
		if k.Namespace != kubeNamespace {
			t.Errorf("%s/%s: namespace %q, want %s", dir, kustomizationFile, k.Namespace, kubeNamespace)
		}
		for _, r := range k.Resources {
			p := path.Clean(path.Join(dir, r))
			st, err := os.Stat(p)
			switch {
			case err != nil:
				t.Errorf("%s/%s: resource %s: %v", dir, kustomizationFile, r, err)
			case st.IsDir():
				if _, ok := set.kustomizations[p]; !ok {
					t.Errorf("%s/%s: resource %s is a directory without a %s", dir, kustomizationFile, r, kustomizationFile)
				}
			default:
				listed[p] = true
			}
		}
		for _, g := range k.ConfigMapGenerator {
			if len(g.Files) == 0 {
				t.Errorf("%s/%s: configMapGenerator %s has no files", dir, kustomizationFile, g.Name)
			}
			for _, e := range g.Files {
				_, file := generatorFile(e)
				p := path.Clean(path.Join(dir, file))
				if strings.HasPrefix(p, "..") || (dir != "." && !strings.HasPrefix(p, dir+"/")) {
					t.Errorf("%s/%s: %s is outside the kustomization's directory, which kustomize refuses", dir, kustomizationFile, file)
				}
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s/%s: configMapGenerator %s: %v", dir, kustomizationFile, g.Name, err)
				}
			}
		}
	}
	if _, ok := set.kustomizations["."]; !ok {
		t.Fatal("no deploy/kustomization.yaml")
	}
	if !slices.Contains(set.kustomizations["."].Resources, kubeDir) {
		t.Errorf("deploy/%s does not include %s/", kustomizationFile, kubeDir)
	}
	files := map[string]bool{}
	for _, m := range set.objects {
		files[m.file] = true
	}
	for f := range files {
		if !listed[f] && f != secretExample {
			t.Errorf("%s is listed in no kustomization's resources", f)
		}
		if listed[f] && f == secretExample {
			t.Errorf("%s is applied by a kustomization: the real Secret is the operator's", f)
		}
	}

	// The dashboard: one generator reads grafana/llm-router.json, labelled
	// for the Grafana sidecar, and the JSON exists nowhere else.
	var found bool
	for _, g := range set.kustomizations["."].ConfigMapGenerator {
		for _, e := range g.Files {
			if _, file := generatorFile(e); file == dashboardFile {
				found = true
				if g.Options.Labels["grafana_dashboard"] != "1" {
					t.Errorf("the dashboard ConfigMap %s lacks the label grafana_dashboard: \"1\"", g.Name)
				}
			}
		}
	}
	if !found {
		t.Errorf("no configMapGenerator of deploy/%s reads %s", kustomizationFile, dashboardFile)
	}
	dash, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.ToSlash(p) == dashboardFile {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// The Helm chart's link to the one copy is not a copy.
			if target, err := filepath.EvalSymlinks(p); err == nil && filepath.ToSlash(target) == dashboardFile {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, dash[:min(len(dash), 4096)]) {
			t.Errorf("%s duplicates %s: generate the ConfigMap from the one copy", p, dashboardFile)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKustomizeBuild builds deploy/ with kustomize (through `kubectl
// kustomize`, when kubectl is installed) and decodes the output strictly:
// it proves kustomize accepts the layout (no file outside a kustomization's
// directory) and that every object lands in the namespace with the
// generated ConfigMaps' hashed names written into the workloads.
func TestKustomizeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kubectl; skipped with -short")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed; the other tests check the files without kustomize")
	}
	out, err := exec.Command(kubectl, "kustomize", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	docs, err := splitDocuments(out)
	if err != nil {
		t.Fatal(err)
	}
	configMaps := map[string]bool{}
	var referenced []string
	for i, doc := range docs {
		obj, err := decodeObject(doc)
		if err != nil {
			t.Errorf("built document %d: %v", i, err)
			continue
		}
		o := obj.(metav1.Object)
		if _, isNS := obj.(*corev1.Namespace); !isNS && o.GetNamespace() != kubeNamespace {
			t.Errorf("%T %s: namespace %q, want %s", obj, o.GetName(), o.GetNamespace(), kubeNamespace)
		}
		switch o := obj.(type) {
		case *corev1.Secret:
			t.Errorf("the build contains Secret %s: credentials are the operator's", o.Name)
		case *corev1.ConfigMap:
			configMaps[o.Name] = true
		case *appsv1.Deployment:
			for _, v := range o.Spec.Template.Spec.Volumes {
				if v.ConfigMap != nil {
					referenced = append(referenced, v.ConfigMap.Name)
				}
			}
		}
	}
	if len(referenced) == 0 {
		t.Fatal("no Deployment mounts a ConfigMap")
	}
	for _, name := range referenced {
		if !configMaps[name] {
			t.Errorf("a Deployment mounts ConfigMap %s, which the build does not contain", name)
		}
	}
	if !configMaps["llm-router-dashboard"] {
		t.Errorf("the build has no llm-router-dashboard ConfigMap (ConfigMaps: %v)", configMaps)
	}
}
