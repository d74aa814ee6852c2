package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import org.junit.jupiter.api.Test;

/**
 * Local decoding against known UidGenerator outputs: the packing and the
 * wrapped IDs of docs/operations.md, parseUID's keys and their order.
 */
class LayoutTest {
    private static final ZoneId SHANGHAI = ZoneId.of("Asia/Shanghai");

    @Test
    void uidGeneratorsLastSecondAsItsParseUidPrintsIt() {
        // operations.md: its time field's last second, worker 1.
        long id = 9223372002495045632L;
        assertEquals(id, Layout.UIDGENERATOR.pack((1L << 28) - 1, 1, 0), "BitsAllocator's packing");
        assertEquals("{\"UID\":\"9223372002495045632\",\"timestamp\":\"2024-11-20 13:24:15\",\"workerId\":\"1\",\"sequence\":\"0\"}",
                Layout.UIDGENERATOR.parseUID(id, ZoneOffset.UTC));
        // A JVM in UTC+8, as UidGenerator's default epoch assumes, prints 21:24:15.
        assertEquals("{\"UID\":\"9223372002495045632\",\"timestamp\":\"2024-11-20 21:24:15\",\"workerId\":\"1\",\"sequence\":\"0\"}",
                Layout.UIDGENERATOR.parseUID(id, SHANGHAI));
    }

    @Test
    void wrappedIdsReadAsTheSecondTheyWereIssuedIn() {
        // CachedUidGenerator's IDs after 2024-11-20: the time field runs into the sign bit.
        long delta = Instant.parse("2026-12-01T08:14:16Z").getEpochSecond() - 1463673600L;
        long id = Layout.UIDGENERATOR.pack(delta, 7, 0);
        assertEquals(-7024218214296920064L, id, "packing without masking runs into the sign bit");
        assertEquals("{\"UID\":\"-7024218214296920064\",\"timestamp\":\"2026-12-01 08:14:16\",\"workerId\":\"7\",\"sequence\":\"0\"}",
                Layout.UIDGENERATOR.parseUID(id, ZoneOffset.UTC));
        assertEquals(delta, Layout.UIDGENERATOR.deltaSeconds(id));
    }

    @Test
    void aNewFleetOnTheOldWorkerNodeTable() {
        // operations.md step 4: a new ID (worker 2001) read with UidGenerator's preset.
        assertEquals("{\"UID\":\"2616391013900288\",\"timestamp\":\"2016-05-20 13:09:07\",\"workerId\":\"2001\",\"sequence\":\"0\"}",
                Layout.UIDGENERATOR.parseUID(2616391013900288L, ZoneOffset.UTC));
    }

    @Test
    void keysInParseUidsOrderAllStrings() {
        String json = Layout.DEFAULT.parseUID(Layout.DEFAULT.pack(90061, 5, 42), ZoneOffset.UTC);
        assertEquals(java.util.List.of("UID", "timestamp", "workerId", "sequence"), java.util.List.copyOf(Json.stringObject(json).keySet()));
        assertTrue(json.startsWith("{\"UID\":\""), json);
    }

    @Test
    void theProtocolCasesLayouts() {
        // protocol/cases.json: 40/9/14 from 2026-01-01 and jssafe, both 2026-01-02 01:01:01, worker 5, sequence 42.
        Layout l = Layout.parse("40/9/14@2026-01-01T00:00:00Z");
        assertEquals(755486507050L, l.pack(90061, 5, 42));
        assertEquals("{\"UID\":\"755486507050\",\"timestamp\":\"2026-01-02 01:01:01\",\"workerId\":\"5\",\"sequence\":\"42\"}",
                l.parseUID(755486507050L, ZoneOffset.UTC));
        assertEquals(377743540266L, Layout.JSSAFE.pack(90061, 5, 42));
        assertEquals(5, Layout.JSSAFE.workerId(377743540266L));
        assertEquals(42, Layout.JSSAFE.sequence(377743540266L));
        assertEquals(Instant.parse("2026-01-02T01:01:01Z"), Layout.JSSAFE.time(377743540266L));
    }

    @Test
    void specs() {
        assertEquals(Layout.UIDGENERATOR, Layout.parse("28/22/13@2016-05-20T00:00:00+08:00"));
        assertEquals(Layout.UIDGENERATOR, Layout.parse(" UidGenerator "));
        assertEquals(Layout.DEFAULT, Layout.parse("31/10/22@2026-01-01"), "a bare date is midnight UTC");
        IllegalArgumentException bare = assertThrows(IllegalArgumentException.class, () -> Layout.parse("28/22/13"));
        assertTrue(bare.getMessage().contains("uidgenerator") && bare.getMessage().contains("@"), bare.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Layout.parse("31/16/17@2026-01-01"), "64 bits");
        assertThrows(IllegalArgumentException.class, () -> Layout.parse("nosuch"));
        assertThrows(IllegalArgumentException.class, () -> Layout.parse("a/b/c@2026-01-01"));
        assertThrows(IllegalArgumentException.class, () -> Layout.parse("31/10/22@yesterday"));
    }
}
