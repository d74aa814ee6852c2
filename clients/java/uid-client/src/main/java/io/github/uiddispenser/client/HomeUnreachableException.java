package io.github.uiddispenser.client;

/**
 * A sequence request in a fleet of regions that no instance of the
 * sequence's home region could answer (all gone, or the gateway to it cut),
 * after no responders lasted the client's home wait. Only the home region
 * serves a sequence: retry later.
 */
public class HomeUnreachableException extends UidException {
    private static final long serialVersionUID = 1L;

    private final String subject;
    private final String sequence;
    private final String home;

    public HomeUnreachableException(String subject, String sequence, String home) {
        super(subject + ": sequence \"" + sequence + "\" is served only by its home region " + home
                + ", which cannot be reached (no responders)");
        this.subject = subject;
        this.sequence = sequence;
        this.home = home;
    }

    /** The request's subject. */
    public String subject() {
        return subject;
    }

    /** The sequence's name. */
    public String sequence() {
        return sequence;
    }

    /** The home region, as the instances reached name it. */
    public String home() {
        return home;
    }
}
