package io.github.uiddispenser.client;

/**
 * IDs in Crockford's base32, as the dispenser writes them with
 * {@code Uid-Encoding: base32}: exactly 13 characters of
 * {@code 0123456789ABCDEFGHJKMNPQRSTVWXYZ}, upper case, zero-padded, so
 * that string order is numeric order. Decoding takes any case and reads I
 * and L as 1, O as 0, as Crockford's decoders do.
 */
public final class Base32 {
    private Base32() {
    }

    /** The number of characters of a base32 ID. */
    public static final int WIDTH = 13;

    private static final char[] ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ".toCharArray();
    private static final byte[] VALUES = new byte[128];

    static {
        java.util.Arrays.fill(VALUES, (byte) -1);
        for (int i = 0; i < ALPHABET.length; i++) {
            char c = ALPHABET[i];
            VALUES[c] = (byte) i;
            VALUES[Character.toLowerCase(c)] = (byte) i;
        }
        VALUES['I'] = VALUES['i'] = VALUES['L'] = VALUES['l'] = 1;
        VALUES['O'] = VALUES['o'] = 0;
    }

    /** id as 13 upper-case base32 characters; a negative long is read as unsigned. */
    public static String encode(long id) {
        char[] b = new char[WIDTH];
        for (int i = WIDTH - 1; i >= 0; i--) {
            b[i] = ALPHABET[(int) (id & 31)];
            id >>>= 5;
        }
        return new String(b);
    }

    /**
     * Reads a base32 ID: exactly 13 characters, any case.
     *
     * @throws IllegalArgumentException naming what is wrong with s
     */
    public static long decode(CharSequence s) {
        if (s.length() != WIDTH) {
            throw new IllegalArgumentException("base32 ID \"" + s + "\" has " + s.length() + " characters, not " + WIDTH);
        }
        long id = 0;
        for (int i = 0; i < WIDTH; i++) {
            char c = s.charAt(i);
            int v = c < 128 ? VALUES[c] : -1;
            if (v < 0) {
                throw new IllegalArgumentException("base32 ID \"" + s + "\" has \"" + c
                        + "\", not a Crockford base32 character (0-9 and A-Z without U)");
            }
            if (i == 0 && v > 15) {
                throw new IllegalArgumentException("base32 ID \"" + s + "\" is above 2^64-1 (its first character is at most F)");
            }
            id = id << 5 | v;
        }
        return id;
    }
}
