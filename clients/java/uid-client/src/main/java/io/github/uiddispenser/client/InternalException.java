package io.github.uiddispenser.client;

/** A 500, or a code the client does not know: not retried. */
public class InternalException extends ServiceException {
    private static final long serialVersionUID = 1L;

    public InternalException(String subject, int code, String description) {
        super(subject, code, description);
    }
}
