package io.github.uiddispenser.client;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The batch replies' encodings, decoded. Every decoder checks what every
 * reply of its encoding satisfies and says what in the bytes does not.
 * Runs are kept as one {@code long[]} of pairs (first, count), so that a
 * ranges reply of any size is a few longs until someone expands it.
 */
final class Wire {
    private Wire() {
    }

    /** Bytes per ID of a binary reply. */
    static final int BINARY_WIDTH = 8;
    /** Bytes per run of a ranges reply: the first ID, then the count. */
    static final int RUN_WIDTH = 16;

    /** The IDs of a binary reply: 8 bytes big-endian each, none with the sign bit. */
    static long[] decodeBinary(byte[] data) {
        if (data.length % BINARY_WIDTH != 0) {
            throw new UidException("binary batch reply of " + data.length + " bytes is not a multiple of 8");
        }
        long[] ids = new long[data.length / BINARY_WIDTH];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = readLong(data, i * BINARY_WIDTH);
            if (ids[i] < 0) {
                throw new UidException("binary batch reply: ID " + i + " has the sign bit set");
            }
        }
        return ids;
    }

    /**
     * The runs of a ranges reply as pairs (first, count). Checked: whole
     * 16-byte runs, each of at least one ID, none reaching the sign bit,
     * each starting after the previous one ends (increasing, none twice).
     * A run may start right after the previous one (runs a sender did not
     * merge).
     */
    static long[] decodeRuns(byte[] data) {
        if (data.length % RUN_WIDTH != 0) {
            throw new UidException("ranges reply of " + data.length + " bytes is not a multiple of 16");
        }
        long[] runs = new long[data.length / RUN_WIDTH * 2];
        long prevLast = -1;
        for (int k = 0; k < runs.length / 2; k++) {
            long first = readLong(data, k * RUN_WIDTH);
            long count = readLong(data, k * RUN_WIDTH + 8);
            if (count == 0) {
                throw new UidException("ranges reply: run " + k + " has a count of 0");
            }
            // Unsigned: a first ID or a count with the top bit set, or a
            // last ID past 2^63-1, reaches the sign bit.
            if (first < 0 || count < 0 || count - 1 > Long.MAX_VALUE - first) {
                throw new UidException("ranges reply: run " + k + " (" + Long.toUnsignedString(count) + " IDs from "
                        + Long.toUnsignedString(first) + ") reaches the sign bit");
            }
            if (k > 0 && first <= prevLast) {
                throw new UidException("ranges reply: run " + k + " starts at " + first
                        + ", not after the previous run's last ID " + prevLast);
            }
            prevLast = first + count - 1;
            runs[2 * k] = first;
            runs[2 * k + 1] = count;
        }
        return runs;
    }

    /** The number of IDs in runs (pairs of first, count); saturates at Long.MAX_VALUE. */
    static long countOf(long[] runs) {
        long n = 0;
        for (int k = 1; k < runs.length; k += 2) {
            n = n + runs[k] < 0 ? Long.MAX_VALUE : n + runs[k];
        }
        return n;
    }

    /** Every ID of runs, in order. */
    static long[] expand(long[] runs) {
        long n = countOf(runs);
        if (n > Integer.MAX_VALUE - 8) {
            throw new UidException("ranges reply of " + n + " IDs is too large to expand into an array");
        }
        long[] ids = new long[(int) n];
        int i = 0;
        for (int k = 0; k < runs.length; k += 2) {
            for (long j = 0; j < runs[k + 1]; j++) {
                ids[i++] = runs[k] + j;
            }
        }
        return ids;
    }

    /** ids (increasing) as runs: each stretch of consecutive IDs one run. */
    static long[] runsOf(long[] ids) {
        long[] runs = new long[16];
        int n = 0;
        for (int i = 0; i < ids.length;) {
            int j = i + 1;
            while (j < ids.length && ids[j] == ids[j - 1] + 1) {
                j++;
            }
            if (n + 2 > runs.length) {
                runs = Arrays.copyOf(runs, runs.length * 2);
            }
            runs[n++] = ids[i];
            runs[n++] = j - i;
            i = j;
        }
        return Arrays.copyOf(runs, n);
    }

    /** The IDs of a text reply: newline-separated decimal, or base32. */
    static long[] decodeLines(byte[] data, boolean base32) {
        String s = new String(data, StandardCharsets.US_ASCII).strip();
        if (s.isEmpty()) {
            return new long[0];
        }
        String[] lines = s.split("\n", -1);
        long[] ids = new long[lines.length];
        for (int i = 0; i < lines.length; i++) {
            String line = lines[i].strip();
            ids[i] = base32 ? base32Id(line) : decimalId(line);
        }
        return ids;
    }

    /** One ID in decimal: digits only, below 2^63. */
    static long decimalId(String s) {
        boolean digits = !s.isEmpty() && s.length() <= 19;
        for (int i = 0; digits && i < s.length(); i++) {
            digits = s.charAt(i) >= '0' && s.charAt(i) <= '9';
        }
        try {
            if (digits) {
                return Long.parseLong(s);
            }
        } catch (NumberFormatException e) {
            // 19 digits above 2^63-1: below.
        }
        throw new UidException("reply \"" + shorten(s, 40) + "\" is not a decimal ID below 2^63");
    }

    /** One ID in base32, below 2^63. */
    static long base32Id(String s) {
        long id;
        try {
            id = Base32.decode(s);
        } catch (IllegalArgumentException e) {
            throw new UidException("reply: " + e.getMessage());
        }
        if (id < 0) {
            throw new UidException("reply \"" + s + "\" has the sign bit set");
        }
        return id;
    }

    static long readLong(byte[] b, int off) {
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = v << 8 | (b[off + i] & 0xFF);
        }
        return v;
    }

    static String shorten(String s, int max) {
        return s.length() <= max ? s : s.substring(0, max) + "…";
    }
}
