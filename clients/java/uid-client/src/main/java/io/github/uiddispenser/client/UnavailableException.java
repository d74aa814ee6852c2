package io.github.uiddispenser.client;

import java.util.OptionalLong;

/**
 * A 503: the instance that answered has no ID right now (at its capacity,
 * its worker claim lost, shutting down). The client retries these until
 * the call's deadline; a {@link GaveUpException} then carries the last one.
 */
public class UnavailableException extends ServiceException {
    private static final long serialVersionUID = 1L;

    private final long retryAfterMs;

    public UnavailableException(String subject, String description, long retryAfterMs) {
        super(subject, Protocol.CODE_UNAVAILABLE, description);
        this.retryAfterMs = retryAfterMs;
    }

    /**
     * The instance's {@code Uid-Retry-After-Ms}: the milliseconds after which
     * it has IDs again (sent with "at capacity"); empty without the header.
     */
    public OptionalLong retryAfterMs() {
        return retryAfterMs > 0 ? OptionalLong.of(retryAfterMs) : OptionalLong.empty();
    }
}
