package io.github.uiddispenser.uidgenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.uiddispenser.client.Layout;
import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.time.ZoneId;
import java.time.ZoneOffset;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * parseUID against known UidGenerator outputs (docs/operations.md): its
 * JSON exactly, keys in its order, values strings, in the zone its JVM ran
 * in. parseUID asks no server, as UidGenerator's did: the generators here
 * are on a NATS server with no dispenser.
 */
class ParseUidIT {
    private static TestEnv.NatsServer server;
    private static Connection nc;

    @BeforeAll
    static void start() throws Exception {
        server = TestEnv.startNatsServer();
        nc = server.connect();
    }

    @AfterAll
    static void stop() throws Exception {
        nc.close();
        server.close();
    }

    private static DispenserUidGenerator gen(Layout layout, ZoneId zone) {
        // getUID is never called: its prefetcher refills from nobody.
        UidClient nobody = UidClient.builder().connection(nc).subjectPrefix("nobody").build();
        return new DispenserUidGenerator(Prefetcher.of(nobody), layout, zone);
    }

    @Test
    void oldIdsAsUidGeneratorPrintedThem() {
        DispenserUidGenerator utc = gen(Layout.UIDGENERATOR, ZoneOffset.UTC);
        DispenserUidGenerator shanghai = gen(Layout.UIDGENERATOR, ZoneId.of("Asia/Shanghai"));
        // Its time field's last second, worker 1; in UTC+8, UidGenerator's own zone, 21:24:15.
        assertEquals("{\"UID\":\"9223372002495045632\",\"timestamp\":\"2024-11-20 13:24:15\",\"workerId\":\"1\",\"sequence\":\"0\"}",
                utc.parseUID(9223372002495045632L));
        assertEquals("{\"UID\":\"9223372002495045632\",\"timestamp\":\"2024-11-20 21:24:15\",\"workerId\":\"1\",\"sequence\":\"0\"}",
                shanghai.parseUID(9223372002495045632L));
        // A wrapped ID of the cached generator: negative, read as the second it was issued.
        assertEquals("{\"UID\":\"-7024218214296920064\",\"timestamp\":\"2026-12-01 08:14:16\",\"workerId\":\"7\",\"sequence\":\"0\"}",
                utc.parseUID(-7024218214296920064L));
        assertEquals("{\"UID\":\"-7024218214296920064\",\"timestamp\":\"2026-12-01 16:14:16\",\"workerId\":\"7\",\"sequence\":\"0\"}",
                shanghai.parseUID(-7024218214296920064L));
        assertEquals("{\"UID\":\"2616391013900288\",\"timestamp\":\"2016-05-20 13:09:07\",\"workerId\":\"2001\",\"sequence\":\"0\"}",
                utc.parseUID(2616391013900288L));
        // The epoch's first second, as UidGenerator in UTC+8 prints it.
        assertEquals("{\"UID\":\"8193\",\"timestamp\":\"2016-05-20 00:00:00\",\"workerId\":\"1\",\"sequence\":\"1\"}",
                shanghai.parseUID(Layout.UIDGENERATOR.pack(0, 1, 1)));
        utc.close();
        shanghai.close();
    }

    @Test
    void theFleetsOwnLayout() {
        DispenserUidGenerator g = gen(Layout.parse("28/22/13@2026-12-01T00:00:00Z"), ZoneOffset.UTC);
        // operations.md step 4: a new ID on the shared WORKER_NODE, worker 2001, read with its own epoch.
        assertEquals("{\"UID\":\"2616391013900288\",\"timestamp\":\"2026-12-01 21:09:07\",\"workerId\":\"2001\",\"sequence\":\"0\"}",
                g.parseUID(2616391013900288L));
    }
}
