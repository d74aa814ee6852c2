package io.github.uiddispenser.client;

/**
 * The base of every exception the client throws. Unchecked: a caller that
 * cannot get an ID usually cannot go on, and one that can catches the
 * subclass it can act on.
 *
 * <ul>
 *   <li>{@link ServiceException}: an error reply of the service, by code:
 *       {@link BadRequestException} (400), {@link UnknownSequenceException}
 *       (404), {@link UnavailableException} (503), {@link InternalException}
 *       (500 and anything else);</li>
 *   <li>{@link HomeUnreachableException}: a sequence's home region cannot be
 *       reached;</li>
 *   <li>{@link GaveUpException}: the call's deadline passed (or the thread was
 *       interrupted) while it retried; its cause is the last failure.</li>
 * </ul>
 */
public class UidException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public UidException(String message) {
        super(message);
    }

    public UidException(String message, Throwable cause) {
        super(message, cause);
    }
}
