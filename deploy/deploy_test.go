// Package deploy_test checks what operations teams plug in:
// deploy/prometheus (promtool check and unit tests of the alert rules: the
// outage ones at a 10s evaluation interval, and healthy clusters, plain and
// HTTPS, that raise none),
// deploy/kubernetes (the manifests parse and wire real flags, ports and
// probes), and, against a real Prometheus scraping a real cluster through the
// shipped scrape configs, that they label every node, the out-of-service
// and clock-rollback alerts fire, no critical alert fires while the cluster is
// healthy, every dashboard query returns data, and the cluster-down alert goes
// pending once every node is dead.
package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/node"
)

// ruleTests are the promtool test files of alerts.yml (in deploy/prometheus):
// alerts_test.yml evaluates every 30s, alerts_outage_test.yml every 10s, the
// interval the outage alerts' "within 30s" is promised at.
var ruleTests = []string{"alerts_test.yml", "alerts_outage_test.yml"}

func TestPrometheusRules(t *testing.T) {
	promtool := testsupport.NeedTool(t, "prometheus", "promtool")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		append([]string{"test", "rules"}, ruleTests...),
		// (scrape-kubernetes.yml: Debian's promtool has no Kubernetes
		// discovery; the integration test runs its relabel rules.)
		{"check", "config", "scrape-static.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertNames returns the alerts of alerts.yml.
func alertNames(t *testing.T) []string {
	t.Helper()
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		names = append(names, m[1])
	}
	if len(names) < 10 {
		t.Fatalf("only %d alerts found in alerts.yml", len(names))
	}
	return names
}

// The rules and their tests cover each other: every alert has a test that
// expects it to fire.
func TestEveryAlertIsTested(t *testing.T) {
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests []byte
	for _, f := range ruleTests {
		b, err := os.ReadFile("prometheus/" + f)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, b...)
	}
	for _, name := range alertNames(t) {
		fires := regexp.MustCompile(`alertname: ` + name + `\n\s+exp_alerts:\n\s+- exp_labels`)
		if !fires.Match(tests) {
			t.Errorf("alert %s has no test that expects it to fire", name)
		}
		if !regexp.MustCompile(name + `(?s).*?runbook_url: "https://`).Match(rules) {
			t.Errorf("alert %s has no runbook_url", name)
		}
	}
}

// Every runbook_url of alerts.yml names a heading of the doc it links to
// (the NodeOutOfService one, templated by reason, is
// TestDocsRunbookReasons's in tests/docs): a renamed section would leave
// the page pointing at the top of the file.
func TestAlertRunbooksResolve(t *testing.T) {
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`runbook_url: "https://codeberg\.org/snowflaked/snowflaked/src/branch/main/(docs/[a-z]+\.md)#([^"{]+)"`).FindAllStringSubmatch(string(rules), -1)
	if len(links) < 10 {
		t.Fatalf("only %d runbook links found", len(links))
	}
	headings := map[string]map[string]bool{}
	for _, l := range links {
		doc, frag := l[1], l[2]
		if headings[doc] == nil {
			b, err := os.ReadFile("../" + doc)
			if err != nil {
				t.Fatal(err)
			}
			headings[doc] = map[string]bool{}
			fenced := false
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "```") {
					fenced = !fenced
				}
				if !fenced && strings.HasPrefix(line, "#") {
					headings[doc][testsupport.HeadingAnchor(strings.TrimSpace(strings.TrimLeft(line, "#")))] = true
				}
			}
		}
		if !headings[doc][frag] {
			t.Errorf("runbook_url %s#%s: no such heading", doc, frag)
		}
	}
}

// Every alert is asserted silent on each healthy cluster of the rule tests
// (the test groups named "healthy …": a plain-HTTP one and one scraped over
// HTTPS), so a new alert cannot page on a healthy cluster untested.
func TestHealthyClustersRaiseNoAlert(t *testing.T) {
	names := alertNames(t)
	healthy := 0
	for _, f := range ruleTests {
		b, err := os.ReadFile("prometheus/" + f)
		if err != nil {
			t.Fatal(err)
		}
		var suite struct {
			Tests []struct {
				Name  string `yaml:"name"`
				Tests []struct {
					Alertname string      `yaml:"alertname"`
					ExpAlerts []yaml.Node `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(b, &suite); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range suite.Tests {
			if !strings.HasPrefix(g.Name, "healthy") {
				continue
			}
			healthy++
			silent := map[string]bool{}
			for _, at := range g.Tests {
				if len(at.ExpAlerts) > 0 {
					t.Errorf("%s: group %q expects %s to fire", f, g.Name, at.Alertname)
				}
				silent[at.Alertname] = true
			}
			for _, name := range names {
				if !silent[name] {
					t.Errorf("%s: group %q does not check that %s stays quiet", f, g.Name, name)
				}
			}
		}
	}
	if healthy < 2 {
		t.Fatalf("%d healthy test groups, want the plain and the HTTPS one", healthy)
	}
}

// k8sDoc is the part of a manifest the checks read.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		ClusterIP   string           `yaml:"clusterIP"`
		ServiceName string           `yaml:"serviceName"`
		Ports       []k8sServicePort `yaml:"ports"`
		Template    k8sPodTemplate   `yaml:"template"`
		Claims      []yaml.Node      `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type k8sServicePort struct {
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type k8sPodTemplate struct {
	Metadata struct {
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Grace int `yaml:"terminationGracePeriodSeconds"`
		// InitContainers: the one that creates the cluster.
		InitContainers []k8sInitContainer `yaml:"initContainers"`
		Containers     []k8sContainer     `yaml:"containers"`
	} `yaml:"spec"`
}

// k8sInitContainer is the part of an init container the checks read.
type k8sInitContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []k8sEnv `yaml:"env"`
}

// k8sContainer is the part of the node container the checks read.
type k8sContainer struct {
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env       []k8sEnv `yaml:"env"`
	Startup   k8sProbe `yaml:"startupProbe"`
	Readiness k8sProbe `yaml:"readinessProbe"`
	Liveness  k8sProbe `yaml:"livenessProbe"`
	Mounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sEnv struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

func loadManifests(t *testing.T) map[string]k8sDoc {
	t.Helper()
	b, err := os.ReadFile("kubernetes/snowflaked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]k8sDoc{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d k8sDoc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kubernetes/snowflaked.yaml: %v", err)
		}
		docs[d.Kind+"/"+d.Metadata.Name] = d
	}
	return docs
}

func TestKubernetesManifests(t *testing.T) {
	docs := loadManifests(t)
	sts, ok := docs["StatefulSet/snowflaked"]
	if !ok {
		t.Fatalf("no StatefulSet/snowflaked among %v", keys(docs))
	}
	checkServices(t, docs, sts)
	pod := sts.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := containerEnv(t, c)
	if env["SNOWFLAKED_NODE_KEY"] != "$(POD_NAME)" {
		t.Errorf("SNOWFLAKED_NODE_KEY = %q, want the pod name", env["SNOWFLAKED_NODE_KEY"])
	}
	if !strings.HasPrefix(env["SNOWFLAKED_ADVERTISE"], "$(POD_NAME).snowflaked-headless.") {
		t.Errorf("SNOWFLAKED_ADVERTISE = %q, want the pod's DNS name under the headless service", env["SNOWFLAKED_ADVERTISE"])
	}
	checkPorts(t, docs, pod, c, env)
	checkCacheOnVolume(t, sts, c, env)
	// The grace period covers the shutdown timeout.
	shutdown, err := time.ParseDuration(env["SNOWFLAKED_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Errorf("SNOWFLAKED_SHUTDOWN_TIMEOUT %q: %v", env["SNOWFLAKED_SHUTDOWN_TIMEOUT"], err)
	}
	if time.Duration(pod.Spec.Grace)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %d is not above --shutdown-timeout %s", pod.Spec.Grace, shutdown)
	}
	if pod.Metadata.Labels["app"] != "snowflaked" {
		t.Errorf("pod label app %q, want snowflaked: the alerts select the up series of their targets by it", pod.Metadata.Labels["app"])
	}
	if pod.Metadata.Labels["cluster"] != env["SNOWFLAKED_CLUSTER"] {
		t.Errorf("pod label cluster %q, SNOWFLAKED_CLUSTER %q: the alerts group by it", pod.Metadata.Labels["cluster"], env["SNOWFLAKED_CLUSTER"])
	}
	checkInitContainer(t, pod, env)
}

// checkServices checks the services and the budget exist and that the
// StatefulSet names the headless one.
func checkServices(t *testing.T, docs map[string]k8sDoc, sts k8sDoc) {
	t.Helper()
	for _, want := range []string{"Service/snowflaked-headless", "Service/snowflaked", "PodDisruptionBudget/snowflaked"} {
		if _, ok := docs[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
	if h := docs["Service/snowflaked-headless"]; h.Spec.ClusterIP != "None" || sts.Spec.ServiceName != "snowflaked-headless" {
		t.Errorf("the StatefulSet's serviceName %q must be the headless service (clusterIP %q)", sts.Spec.ServiceName, h.Spec.ClusterIP)
	}
}

// containerEnv returns the container's environment by name, failing on any
// SNOWFLAKED_ variable that names no flag.
func containerEnv(t *testing.T, c k8sContainer) map[string]string {
	t.Helper()
	env := map[string]string{}
	known := node.EnvVars()
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if strings.HasPrefix(e.Name, "SNOWFLAKED_") && !known[e.Name] {
			t.Errorf("env %s matches no flag of snowflaked", e.Name)
		}
	}
	return env
}

// checkPorts checks the listen port, the container port, the services'
// target, the probes and the scrape annotation agree.
func checkPorts(t *testing.T, docs map[string]k8sDoc, pod k8sPodTemplate, c k8sContainer, env map[string]string) {
	t.Helper()
	_, listenPort, _ := strings.Cut(env["SNOWFLAKED_LISTEN"], ":")
	if len(c.Ports) != 1 || strconv.Itoa(c.Ports[0].ContainerPort) != listenPort || c.Ports[0].Name != "http" {
		t.Errorf("container ports %+v do not match SNOWFLAKED_LISTEN %q", c.Ports, env["SNOWFLAKED_LISTEN"])
	}
	if !strings.HasSuffix(env["SNOWFLAKED_ADVERTISE"], ":"+listenPort) {
		t.Errorf("advertised %q on another port than the listen port %s", env["SNOWFLAKED_ADVERTISE"], listenPort)
	}
	for _, name := range []string{"Service/snowflaked-headless", "Service/snowflaked"} {
		for _, p := range docs[name].Spec.Ports {
			if p.TargetPort != c.Ports[0].Name {
				t.Errorf("%s targets port %q, the container's is %q", name, p.TargetPort, c.Ports[0].Name)
			}
		}
	}
	if c.Readiness.HTTPGet.Path != "/readyz" || c.Liveness.HTTPGet.Path != "/healthz" || c.Readiness.HTTPGet.Port != "http" || c.Liveness.HTTPGet.Port != "http" {
		t.Errorf("probes: readiness %+v, liveness %+v; want /readyz and /healthz on http", c.Readiness, c.Liveness)
	}
	checkStartupProbe(t, c.Startup)
	if pod.Metadata.Annotations["prometheus.io/port"] != listenPort {
		t.Errorf("scrape port annotation %q, listen port %s", pod.Metadata.Annotations["prometheus.io/port"], listenPort)
	}
}

// checkStartupProbe checks the startup probe asks /healthz, which answers
// once the process listens, also while the node waits for its claim (a
// startup probe on /readyz would restart a pod that waits for a lease or a
// fence, and so start the wait again), and gives the process at least
// minStartupBudget to listen.
func checkStartupProbe(t *testing.T, p k8sProbe) {
	t.Helper()
	const minStartupBudget = 30 * time.Second
	if p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != "http" {
		t.Errorf("startupProbe %+v: want /healthz on http", p.HTTPGet)
	}
	period, failures := max(p.PeriodSeconds, 0), max(p.FailureThreshold, 0)
	if period == 0 { // Kubernetes' defaults
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	if budget := time.Duration(period*failures) * time.Second; budget < minStartupBudget {
		t.Errorf("startupProbe allows %v (periodSeconds %d x failureThreshold %d), want at least %v", budget, period, failures, minStartupBudget)
	}
}

// checkCacheOnVolume checks the cache file lives on the claimed volume.
func checkCacheOnVolume(t *testing.T, sts k8sDoc, c k8sContainer, env map[string]string) {
	t.Helper()
	cache := env["SNOWFLAKED_CACHE_FILE"]
	onVolume := false
	for _, m := range c.Mounts {
		if m.Name == "data" && strings.HasPrefix(cache, m.MountPath+"/") {
			onVolume = true
		}
	}
	if !onVolume || len(sts.Spec.Claims) != 1 {
		t.Errorf("cache file %q is not on the data volume claim (mounts %+v)", cache, c.Mounts)
	}
}

// checkInitContainer checks nodes do not create their cluster: an init
// container does, on the node's ensemble, under the node's cluster name.
func checkInitContainer(t *testing.T, pod k8sPodTemplate, env map[string]string) {
	t.Helper()
	if env["SNOWFLAKED_CREATE_CLUSTER"] != "" {
		t.Errorf("the node container sets SNOWFLAKED_CREATE_CLUSTER=%q: the init container creates the cluster", env["SNOWFLAKED_CREATE_CLUSTER"])
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want the one that creates the cluster", len(pod.Spec.InitContainers))
	}
	ic := pod.Spec.InitContainers[0]
	icEnv := map[string]string{}
	for _, e := range ic.Env {
		icEnv[e.Name] = e.Value
	}
	want := []string{"cluster", "create", env["SNOWFLAKED_CLUSTER"], "--zk", "$(SNOWFLAKED_ZK)"}
	if strings.Join(ic.Command, " ") != "/usr/local/bin/snowflakectl" || strings.Join(ic.Args, " ") != strings.Join(want, " ") || icEnv["SNOWFLAKED_ZK"] != env["SNOWFLAKED_ZK"] {
		t.Errorf("init container %+v: want snowflakectl %v with the node's SNOWFLAKED_ZK %q", ic, want, env["SNOWFLAKED_ZK"])
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
