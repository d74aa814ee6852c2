package io.github.uiddispenser.client;

/**
 * A 404: the named sequence is declared nowhere ({@code DISPENSER_SEQUENCES}).
 * Retrying cannot help.
 */
public class UnknownSequenceException extends ServiceException {
    private static final long serialVersionUID = 1L;

    public UnknownSequenceException(String subject, String description) {
        super(subject, Protocol.CODE_NOT_FOUND, description);
    }
}
