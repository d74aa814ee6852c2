package io.github.uiddispenser.client;

/**
 * A call that retried until its deadline (or until its thread was
 * interrupted) without an answer. {@link #getCause()} is the last failure:
 * an {@link UnavailableException} with the instance's retry hint, a
 * {@link NoRespondersException} (no instance subscribed: all down or
 * restarting) or an {@link AttemptTimeoutException}; null when no attempt
 * was made.
 */
public class GaveUpException extends UidException {
    private static final long serialVersionUID = 1L;

    /** Why the call stopped. */
    public enum Reason {
        /** The call's deadline passed. */
        DEADLINE,
        /** The calling thread was interrupted; its interrupt flag is set again. */
        INTERRUPTED
    }

    private final Reason reason;
    private final int attempts;

    public GaveUpException(String subject, Reason reason, int attempts, Throwable last) {
        super(subject + ": gave up (" + reason.name().toLowerCase(java.util.Locale.ROOT) + ") after " + attempts
                + " attempt(s)" + (last == null ? "" : "; last error: " + last.getMessage()), last);
        this.reason = reason;
        this.attempts = attempts;
    }

    /** Why the call stopped. */
    public Reason reason() {
        return reason;
    }

    /** The requests sent. */
    public int attempts() {
        return attempts;
    }
}
