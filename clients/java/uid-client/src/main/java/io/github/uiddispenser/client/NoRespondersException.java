package io.github.uiddispenser.client;

/**
 * NATS's no-responders status: no instance is subscribed to the subject
 * (all down or restarting). Retried; seen as a {@link GaveUpException}'s
 * cause.
 */
public class NoRespondersException extends UidException {
    private static final long serialVersionUID = 1L;

    public NoRespondersException(String subject) {
        super(subject + ": no responders (no dispenser instance is subscribed)");
    }
}
