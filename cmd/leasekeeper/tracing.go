package main

import (
	"context"
	"fmt"
	"net/url"
	"runtime"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// startTracing exports traces over OTLP/HTTP to endpoint, a base URL such as
// http://collector:4318 to which /v1/traces is added (as to OTEL_EXPORTER_OTLP_ENDPOINT), or,
// when endpoint is empty, to what OTEL_EXPORTER_OTLP_ENDPOINT and the other
// OTEL_EXPORTER_OTLP_* variables say. The caller decides that tracing is on. stop flushes the
// spans not yet sent.
func startTracing(ctx context.Context, endpoint string) (tp *sdktrace.TracerProvider, stop func(context.Context) error, err error) {
	var opts []otlptracehttp.Option
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, nil, fmt.Errorf("otlp endpoint: %w", err)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.JoinPath("v1/traces").String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "leasekeeper"),
		attribute.String("service.version", buildVersion()), attribute.String("process.runtime.version", runtime.Version()))
	// The sampler is the SDK's default (parent-based, always on), or OTEL_TRACES_SAMPLER's.
	tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
