package deploy_test

import (
	"fmt"
	"net"
	"os"
	"testing"

	"gopkg.in/yaml.v3"
)

// scrapeJob is the part of a shipped scrape job the tests rewrite; the rest
// (relabel rules, paths) goes to Prometheus as shipped.
type scrapeJob = map[string]any

// loadScrapeJob returns the one job of a shipped scrape config file.
func loadScrapeJob(t *testing.T, path string) scrapeJob {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []scrapeJob `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(cfg.ScrapeConfigs) != 1 {
		t.Fatalf("%s: %d scrape jobs, want 1", path, len(cfg.ScrapeConfigs))
	}
	return cfg.ScrapeConfigs[0]
}

// scrapeConfigs returns the scrape_configs of the test's Prometheus: the
// shipped static job scraping static (cluster label set to cluster) and the
// shipped Kubernetes pods job scraping pods. Prometheus here has no
// Kubernetes API to discover pods from (and Debian's build has no Kubernetes
// discovery), so the pods job's kubernetes_sd_configs is replaced by static
// targets carrying the __meta_kubernetes_* labels pod discovery gives a pod
// of deploy/kubernetes/snowflaked.yaml: the shipped relabel rules then run
// unchanged on them. A pod of another application, and a snowflaked pod
// that does not ask to be scraped, sit beside them, and must be dropped.
func scrapeConfigs(t *testing.T, cluster string, static, pods []string) []scrapeJob {
	t.Helper()
	st := loadScrapeJob(t, "prometheus/scrape-static.yml")
	st["job_name"] = "snowflaked-static"
	sc, ok := st["static_configs"].([]any)
	if !ok || len(sc) != 1 {
		t.Fatalf("scrape-static.yml: static_configs %v, want one entry", st["static_configs"])
	}
	entry := sc[0].(map[string]any)
	labels, ok := entry["labels"].(map[string]any)
	if !ok || labels["app"] != "snowflaked" || labels["cluster"] == nil {
		t.Fatalf("scrape-static.yml: labels %v, want app: snowflaked and a cluster", entry["labels"])
	}
	entry["targets"], labels["cluster"] = static, cluster

	k8s := loadScrapeJob(t, "prometheus/scrape-kubernetes.yml")
	if _, ok := k8s["kubernetes_sd_configs"]; !ok {
		t.Fatalf("scrape-kubernetes.yml: no kubernetes_sd_configs")
	}
	delete(k8s, "kubernetes_sd_configs")
	k8s["job_name"] = "kubernetes-pods"
	pod := func(i int, addr, app, scrape string) map[string]any {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{
			// pod discovery: the pod IP and its container port
			"targets": []string{host + ":8080"},
			"labels": map[string]string{
				"__meta_kubernetes_namespace":                                "default",
				"__meta_kubernetes_pod_name":                                 fmt.Sprintf("snowflaked-%d", i),
				"__meta_kubernetes_pod_label_app_kubernetes_io_name":         app,
				"__meta_kubernetes_pod_label_app":                            app,
				"__meta_kubernetes_pod_label_cluster":                        cluster,
				"__meta_kubernetes_pod_annotation_prometheus_io_scrape":      scrape,
				"__meta_kubernetes_pod_annotation_prometheus_io_port":        port,
				"__meta_kubernetes_pod_annotation_prometheus_io_path":        "/metrics",
				"__meta_kubernetes_pod_annotationpresent_prometheus_io_port": "true",
			},
		}
	}
	var targets []any
	for i, a := range pods {
		targets = append(targets, pod(i, a, "snowflaked", "true"))
	}
	targets = append(targets, pod(90, "127.0.0.1:9", "other", "true"), pod(91, "127.0.0.1:9", "snowflaked", "false"))
	k8s["static_configs"] = targets
	return []scrapeJob{st, k8s}
}
