package io.github.uiddispenser.client;

import io.nats.client.impl.Headers;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapSetter;

/**
 * Tracing through the global OpenTelemetry (tracer provider and
 * propagator, read at each call so that an application may install them
 * after making the client). Loaded only when the API is on the classpath.
 */
final class OtelTracing implements Tracing {
    private static final String SCOPE = "io.github.uiddispenser.client";
    private static final TextMapSetter<Headers> SETTER = (headers, key, value) -> {
        if (headers != null) {
            headers.put(key, value);
        }
    };

    @Override
    public Tracing.Call start(String template, String subject, Headers headers) {
        Span span = GlobalOpenTelemetry.getTracer(SCOPE).spanBuilder("send " + template)
                .setSpanKind(SpanKind.CLIENT)
                .setAttribute("messaging.system", "nats")
                .setAttribute("messaging.destination.name", template)
                .setAttribute("messaging.operation.type", "send")
                .startSpan();
        GlobalOpenTelemetry.getPropagators().getTextMapPropagator().inject(Context.current().with(span), headers, SETTER);
        return error -> {
            if (error != null && span.isRecording()) {
                span.recordException(error);
                span.setStatus(StatusCode.ERROR, String.valueOf(error.getMessage()));
            }
            span.end();
        };
    }
}
