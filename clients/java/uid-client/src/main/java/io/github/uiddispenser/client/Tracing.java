package io.github.uiddispenser.client;

import io.nats.client.impl.Headers;

/**
 * The OpenTelemetry side of the client, present only when the application
 * has the OpenTelemetry API on its classpath: then every call is a client
 * span ({@code send uid.next}) whose W3C trace context goes in the request's
 * headers, through the global propagator, so the dispenser's span joins the
 * caller's trace. Without the API every call is a no-op.
 */
interface Tracing {
    /** A call's span; ended once, after all its attempts. */
    interface Call {
        void end(Throwable error);
    }

    /** Starts the span of a call on subject (named after template) and injects its context into headers. */
    Call start(String template, String subject, Headers headers);

    Call NO_SPAN = error -> {
    };

    Tracing NONE = (template, subject, headers) -> NO_SPAN;

    /** OpenTelemetry's when its API is on the classpath, else NONE. */
    static Tracing detect() {
        try {
            Class.forName("io.opentelemetry.api.GlobalOpenTelemetry", false, Tracing.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return NONE;
        }
        return new OtelTracing();
    }
}
