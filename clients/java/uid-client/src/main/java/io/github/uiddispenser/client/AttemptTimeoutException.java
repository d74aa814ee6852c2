package io.github.uiddispenser.client;

/**
 * One attempt got no reply within the attempt timeout: the instance that
 * held the request may have died. Retried; seen as a
 * {@link GaveUpException}'s cause.
 */
public class AttemptTimeoutException extends UidException {
    private static final long serialVersionUID = 1L;

    public AttemptTimeoutException(String subject, long timeoutMs) {
        super(subject + ": no reply within " + timeoutMs + " ms");
    }
}
