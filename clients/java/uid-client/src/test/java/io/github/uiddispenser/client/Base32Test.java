package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Crockford base32 as the Go protocol package writes and reads it. */
class Base32Test {
    @Test
    void knownValues() {
        // docs/protocol.md and protocol/cases.json.
        assertEquals("03DXCZR000000", Base32.encode(123757721697648640L));
        assertEquals("00000NZK82G1A", Base32.encode(755486507050L));
        assertEquals("0000000000010", Base32.encode(32));
        assertEquals("0000000000000", Base32.encode(0));
        assertEquals("FZZZZZZZZZZZZ", Base32.encode(-1L), "2^64-1, a long read unsigned");
        assertEquals(755486507050L, Base32.decode("00000nzk82g1a"));
        assertEquals(32, Base32.decode("0000000000010"));
    }

    @Test
    void decodingReadsCrockfordsLookAlikes() {
        assertEquals(Base32.decode("0000000000011"), Base32.decode("000000000001I"));
        assertEquals(Base32.decode("0000000000011"), Base32.decode("00000000000lL"));
        assertEquals(0, Base32.decode("OOOOOOOOOOOOo"));
    }

    @Test
    void stringOrderIsNumericOrder() {
        SplittableRandom r = new SplittableRandom(7);
        for (int i = 0; i < 10_000; i++) {
            long a = r.nextLong() >>> 1;
            long b = r.nextLong() >>> (1 + r.nextInt(60));
            assertEquals(Long.signum(Long.compare(a, b)), Integer.signum(Base32.encode(a).compareTo(Base32.encode(b))));
            assertEquals(a, Base32.decode(Base32.encode(a)));
            assertEquals(a, Base32.decode(Base32.encode(a).toLowerCase()));
        }
    }

    @Test
    void badInputSaysWhy() {
        IllegalArgumentException u = assertThrows(IllegalArgumentException.class, () -> Base32.decode("00000NZK82G1U"));
        assertTrue(u.getMessage().contains("not a Crockford base32 character"), u.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Base32.decode("123"), "length");
        assertThrows(IllegalArgumentException.class, () -> Base32.decode("G000000000000"), "above 2^64-1");
        assertThrows(IllegalArgumentException.class, () -> Base32.decode("000000000000é"));
    }
}
