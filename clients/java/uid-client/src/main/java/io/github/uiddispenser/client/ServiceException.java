package io.github.uiddispenser.client;

/**
 * An error reply of the service: the headers {@code Nats-Service-Error-Code}
 * and {@code Nats-Service-Error} of a reply with an empty body. The
 * subclasses name the codes a caller branches on.
 */
public class ServiceException extends UidException {
    private static final long serialVersionUID = 1L;

    private final String subject;
    private final int code;
    private final String description;

    ServiceException(String subject, int code, String description) {
        super(subject + ": " + code + " " + description);
        this.subject = subject;
        this.code = code;
        this.description = description;
    }

    /** The request's subject, such as {@code uid.batch}. */
    public String subject() {
        return subject;
    }

    /** The error code: 400, 404, 503 or 500. */
    public int code() {
        return code;
    }

    /** What went wrong, as the service put it. */
    public String description() {
        return description;
    }

    /**
     * The exception for an error reply's code header and description, or
     * null when there is no code (not an error reply). A code that is not a
     * number is an {@link InternalException} saying so.
     */
    static ServiceException fromHeaders(String subject, String code, String description, String retryAfter) {
        if (code == null || code.isEmpty()) {
            return null;
        }
        String d = description == null ? "" : description;
        int n;
        try {
            n = Integer.parseInt(code.trim());
        } catch (NumberFormatException e) {
            return new InternalException(subject, Protocol.CODE_INTERNAL, "unparseable error code \"" + code + "\": " + d);
        }
        switch (n) {
            case Protocol.CODE_BAD_REQUEST:
                return new BadRequestException(subject, d);
            case Protocol.CODE_NOT_FOUND:
                return new UnknownSequenceException(subject, d);
            case Protocol.CODE_UNAVAILABLE:
                return new UnavailableException(subject, d, parseRetryAfter(retryAfter));
            default:
                return new InternalException(subject, n, d);
        }
    }

    private static long parseRetryAfter(String v) {
        if (v == null) {
            return -1;
        }
        try {
            long ms = Long.parseLong(v.trim());
            return ms > 0 ? ms : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
