package io.github.uiddispenser.client;

/** A 400: the request is malformed (a count out of range, an ID that is not one). Retrying cannot help. */
public class BadRequestException extends ServiceException {
    private static final long serialVersionUID = 1L;

    public BadRequestException(String subject, String description) {
        super(subject, Protocol.CODE_BAD_REQUEST, description);
    }
}
