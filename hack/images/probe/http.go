package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
)

// serve answers GET / with "probe <hostname>" until killed.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "probe %s\n", host)
	})
	log.Printf("probe %s listening on %s", host, *addr)
	return http.ListenAndServe(*addr, nil)
}

// get prints the body of GET url; a non-200 answer is an error.
func get(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: probe get URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", args[0], err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", args[0], err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return fmt.Errorf("get %s: read body: %w", args[0], err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", args[0], resp.Status)
	}
	return nil
}
