package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The batch encodings decoded from hand-made bytes, as the protocol specifies them. */
class WireTest {
    /** A ranges reply: 16 bytes per run, first then count, big-endian. */
    private static byte[] ranges(long... pairs) {
        ByteBuffer b = ByteBuffer.allocate(pairs.length * 8);
        for (long v : pairs) {
            b.putLong(v);
        }
        return b.array();
    }

    @Test
    void rangesExpandInOrder() {
        // Two runs: 3 IDs from 1000, then 2 from 2000 (another second or worker).
        byte[] data = ranges(1000, 3, 2000, 2);
        assertEquals(32, data.length);
        assertEquals(0x03, data[15], "the count is big-endian in bytes 8-15");
        long[] runs = Wire.decodeRuns(data);
        assertArrayEquals(new long[] {1000, 3, 2000, 2}, runs);
        assertEquals(5, Wire.countOf(runs));
        assertArrayEquals(new long[] {1000, 1001, 1002, 2000, 2001}, Wire.expand(runs));
    }

    @Test
    void rangesOfALargeBatchAreFewBytes() {
        // 32,768 IDs of one second and worker: one run, 16 bytes, where binary takes 256 KiB.
        long first = 123757721697648640L;
        long[] ids = Wire.expand(Wire.decodeRuns(ranges(first, 32768)));
        assertEquals(32768, ids.length);
        assertEquals(first + 32767, ids[32767]);
        assertArrayEquals(new long[] {first, 32768}, Wire.runsOf(ids));
    }

    @Test
    void rangesMayTouchButNotOverlap() {
        assertArrayEquals(new long[] {1, 2, 3, 4, 5}, Wire.expand(Wire.decodeRuns(ranges(1, 2, 3, 3))));
        UidException overlap = assertThrows(UidException.class, () -> Wire.decodeRuns(ranges(10, 5, 14, 1)));
        assertTrue(overlap.getMessage().contains("run 1 starts at 14, not after the previous run's last ID 14"), overlap.getMessage());
        assertThrows(UidException.class, () -> Wire.decodeRuns(ranges(10, 1, 9, 1)), "decreasing");
    }

    @Test
    void rangesRefuseWhatNoReplyHolds() {
        assertTrue(Wire.decodeRuns(new byte[0]).length == 0);
        assertThrows(UidException.class, () -> Wire.decodeRuns(new byte[17]), "not whole runs");
        UidException zero = assertThrows(UidException.class, () -> Wire.decodeRuns(ranges(5, 0)));
        assertTrue(zero.getMessage().contains("count of 0"), zero.getMessage());
        // A run whose last ID passes 2^63-1, a first ID with the sign bit, a huge count.
        assertThrows(UidException.class, () -> Wire.decodeRuns(ranges(Long.MAX_VALUE - 1, 3)));
        assertThrows(UidException.class, () -> Wire.decodeRuns(ranges(-5, 1)));
        assertThrows(UidException.class, () -> Wire.decodeRuns(ranges(0, -1)));
        // The last ID exactly 2^63-1 is fine.
        assertArrayEquals(new long[] {Long.MAX_VALUE - 1, Long.MAX_VALUE}, Wire.expand(Wire.decodeRuns(ranges(Long.MAX_VALUE - 1, 2))));
    }

    @Test
    void binaryIsEightBytesBigEndian() {
        ByteBuffer b = ByteBuffer.allocate(16).putLong(123757721697648640L).putLong(123757721697648641L);
        assertArrayEquals(new long[] {123757721697648640L, 123757721697648641L}, Wire.decodeBinary(b.array()));
        assertThrows(UidException.class, () -> Wire.decodeBinary(new byte[7]));
        assertThrows(UidException.class, () -> Wire.decodeBinary(ByteBuffer.allocate(8).putLong(-1).array()), "sign bit");
    }

    @Test
    void runsOfCoalesceConsecutiveIds() {
        assertArrayEquals(new long[] {5, 3, 10, 1, 12, 2}, Wire.runsOf(new long[] {5, 6, 7, 10, 12, 13}));
        assertArrayEquals(new long[0], Wire.runsOf(new long[0]));
    }

    @Test
    void textLines() {
        byte[] dec = "123757721697648640\n123757721697648641".getBytes(StandardCharsets.US_ASCII);
        assertArrayEquals(new long[] {123757721697648640L, 123757721697648641L}, Wire.decodeLines(dec, false));
        byte[] b32 = "03DXCZR000000\n03dxczr000001".getBytes(StandardCharsets.US_ASCII);
        assertArrayEquals(new long[] {123757721697648640L, 123757721697648641L}, Wire.decodeLines(b32, true));
        assertThrows(UidException.class, () -> Wire.decodeLines("12\nx".getBytes(StandardCharsets.US_ASCII), false));
        for (String bad : new String[] {"", "-5", "+5", "9223372036854775808", " 5", "5a", "12345678901234567890"}) {
            assertThrows(UidException.class, () -> Wire.decimalId(bad), bad);
        }
        assertEquals(Long.MAX_VALUE, Wire.decimalId("9223372036854775807"));
        assertThrows(UidException.class, () -> Wire.base32Id("FZZZZZZZZZZZZ"), "above 2^63");
    }
}
