package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// Sample is one element of an instant query's result vector.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix time, "value"]
}

// Float is the sample's value.
func (s Sample) Float() (float64, error) {
	str, ok := s.Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample %v: value %v is not a string", s.Metric, s.Value[1])
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return 0, fmt.Errorf("sample %v: %w", s.Metric, err)
	}
	return v, nil
}

// Target is one active scrape target (/api/v1/targets).
type Target struct {
	DiscoveredLabels map[string]string `json:"discoveredLabels"`
	Labels           map[string]string `json:"labels"`
	ScrapePool       string            `json:"scrapePool"`
	ScrapeURL        string            `json:"scrapeUrl"`
	LastError        string            `json:"lastError"`
	Health           string            `json:"health"` // up, down, unknown
}

// Query runs an instant PromQL query.
func (s *Server) Query(ctx context.Context, q string) ([]Sample, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []Sample `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &data); err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %q, want vector", q, data.ResultType)
	}
	return data.Result, nil
}

// Targets returns the active scrape targets.
func (s *Server) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		ActiveTargets []Target `json:"activeTargets"`
	}
	if err := s.get(ctx, "/api/v1/targets?state=active", &data); err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	return data.ActiveTargets, nil
}

// WaitQuery polls q until it returns at least one sample and returns them.
func (s *Server) WaitQuery(t testing.TB, timeout time.Duration, q string) []Sample {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := s.Query(ctx, q)
		cancel()
		if err == nil && len(res) > 0 {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus: %s returned nothing after %v (last error %v)", q, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// get GETs an HTTP API path and decodes the data of a success envelope.
func (s *Server) get(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("HTTP %s: decode: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("HTTP %s: %s: %s", resp.Status, body.ErrorType, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}
