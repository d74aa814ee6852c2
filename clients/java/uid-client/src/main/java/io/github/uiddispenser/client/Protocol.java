package io.github.uiddispenser.client;

/**
 * The names of the wire protocol (docs/protocol.md in the repository), as
 * the Go package natsio/protocol defines them.
 */
public final class Protocol {
    private Protocol() {
    }

    /** The subject prefix of a dispenser that sets none. */
    public static final String DEFAULT_SUBJECT_PREFIX = "uid";
    /** Selects the reply's encoding; absent means decimal. */
    public static final String ENCODING_HEADER = "Uid-Encoding";
    /** On a parse request: the layout to decode the ID with instead of the fleet's. */
    public static final String LAYOUT_HEADER = "Uid-Layout";
    /** With a 503 at capacity: the milliseconds until the instance has IDs again. */
    public static final String RETRY_AFTER_HEADER = "Uid-Retry-After-Ms";
    /** On every reply of the sequence subjects: the micro instance that answered. */
    public static final String INSTANCE_HEADER = "Uid-Instance";
    /** An error reply's code. */
    public static final String ERROR_CODE_HEADER = "Nats-Service-Error-Code";
    /** An error reply's description. */
    public static final String ERROR_HEADER = "Nats-Service-Error";

    static final int CODE_BAD_REQUEST = 400;
    static final int CODE_NOT_FOUND = 404;
    static final int CODE_UNAVAILABLE = 503;
    static final int CODE_INTERNAL = 500;

    /** The subject of an endpoint under prefix: {@code uid.next}. */
    static String subject(String prefix, String endpoint) {
        return prefix + "." + endpoint;
    }

    /** The subject of op on the sequence name: {@code uid.seq.orders.next}. */
    static String seqSubject(String prefix, String name, String op) {
        return prefix + ".seq." + name + "." + op;
    }
}
