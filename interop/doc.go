// Package interop holds fluentcore's interoperability tests: the core sends to real,
// independent Fluent Forward receivers installed from the package registries — the
// OpenTelemetry Collector's fluentforwardreceiver (built from ./otelrecv, a module of its
// own) and @fluent-org/logger's FluentServer (./node, installed with npm ci) — each run as
// a child process that prints what it received as JSON lines. The package has no API; see
// README.md for what runs and how the records map.
package interop
