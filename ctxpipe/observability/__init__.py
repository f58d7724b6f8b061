"""Observability: OpenTelemetry tracing (`tracing`: the SDK set up from the standard `OTEL_*`
variables, off by default; `spans`: the hand spans of the commit phases, the LLM calls and the
read path, on the OpenTelemetry API only) and readable log lines that carry the commit id and
the trace id (`logs`)."""
