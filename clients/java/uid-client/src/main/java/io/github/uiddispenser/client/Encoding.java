package io.github.uiddispenser.client;

/**
 * How a reply carries IDs on the wire (the {@code Uid-Encoding} header). It
 * changes nothing of what a call returns: every call gives {@code long}s.
 */
public enum Encoding {
    /** Decimal ASCII, newline-separated in a batch: no header. */
    DECIMAL(null),
    /** 8 bytes big-endian per ID (batches; a single ID comes back in decimal). */
    BINARY("binary"),
    /** 13 Crockford base32 characters per ID, newline-separated in a batch. */
    BASE32("base32"),
    /**
     * A batch as runs of consecutive IDs, 16 bytes per run (the first ID,
     * then the count, each 8 bytes big-endian), in increasing order: a batch
     * of one worker in one second is 16 bytes whatever its size. Needs a
     * dispenser that knows it; one that does not answers a 400 naming the
     * encodings it knows.
     */
    RANGES("ranges");

    private final String headerValue;

    Encoding(String headerValue) {
        this.headerValue = headerValue;
    }

    /** The {@code Uid-Encoding} value that asks for it; null for decimal, which needs no header. */
    public String headerValue() {
        return headerValue;
    }
}
