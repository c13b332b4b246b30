package promtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConfigYAML(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{
			name: "DefaultInterval",
			cfg:  Config{ScrapeConfigs: StaticScrape("agent", "127.0.0.1:8443")},
			want: "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n" +
				"- job_name: \"agent\"\n  static_configs:\n  - targets: [\"127.0.0.1:8443\"]\n",
		},
		{
			name: "Milliseconds",
			cfg:  Config{ScrapeInterval: 1500 * time.Millisecond, ScrapeConfigs: "- job_name: x\n"},
			want: "global:\n  scrape_interval: 1500ms\n  scrape_timeout: 1500ms\nscrape_configs:\n- job_name: x\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, configYAML(tc.cfg)); diff != "" {
				t.Errorf("configYAML (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSampleFloat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   any
		want    float64
		wantErr bool
	}{
		{"Number", "12.5", 12.5, false},
		{"NaN string", "abc", 0, true},
		{"NotString", 3.0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Sample{Value: [2]any{1.0, tc.value}}.Float()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Float() = %v, %v; want %v, error %t", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestServer_ScrapesStaticTarget runs a real Prometheus against a test
// HTTP server and reads the sample and the target's health back.
func TestServer_ScrapesStaticTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE promtest_answer gauge\npromtest_answer{kind=\"test\"} 42\n")
	}))
	t.Cleanup(exporter.Close)
	target := strings.TrimPrefix(exporter.URL, "http://")

	s := Start(t, Config{ScrapeConfigs: StaticScrape("exporter", target)})
	res := s.WaitQuery(t, 30*time.Second, "promtest_answer")
	got := res[0].Metric
	want := map[string]string{"__name__": "promtest_answer", "kind": "test", "job": "exporter", "instance": target}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series labels (-want +got):\n%s", diff)
	}
	if v, err := res[0].Float(); err != nil || v != 42 {
		t.Errorf("value = %v, %v; want 42", v, err)
	}
	targets, err := s.Targets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Health != "up" || targets[0].ScrapeURL != exporter.URL+"/metrics" {
		t.Errorf("targets = %+v, want one, up, scraping %s/metrics", targets, exporter.URL)
	}
}
