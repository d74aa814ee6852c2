package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** The prefetcher against the real dispenser: its reserve, its refills, its errors. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PrefetcherIT {
    private TestEnv.NatsServer server;
    private TestEnv.Dispenser dispenser;
    private Connection nc;

    @BeforeAll
    void start() throws Exception {
        server = TestEnv.startNatsServer();
        dispenser = TestEnv.startDispenser(server.url());
        nc = server.connect();
    }

    @AfterAll
    void stop() throws Exception {
        if (nc != null) {
            nc.close();
        }
        if (dispenser != null) {
            dispenser.close();
        }
        if (server != null) {
            server.close();
        }
    }

    @Test
    void keepsAReserveAndRefillsItInTheBackground() {
        UidClient c = UidClient.builder().connection(nc).build();
        Prefetcher p = Prefetcher.builder(c).minBatch(500).maxBatch(5000).build();
        Set<Long> seen = new HashSet<>();
        try {
            TestEnv.waitFor("the first refill", Duration.ofSeconds(30), () -> p.available() >= 500);
            for (int i = 0; i < 20_000; i++) {
                assertTrue(seen.add(p.next()), "an ID twice");
            }
            assertTrue(c.stats().requests() >= 4, "refilled: " + c.stats());
            // Taking as fast as it can, the reserve follows the rate (1 s of IDs, within the bounds).
            TestEnv.waitFor("the reserve target to follow the rate", Duration.ofSeconds(60), () -> {
                for (int i = 0; i < 1000; i++) {
                    seen.add(p.next());
                }
                return p.reserveTarget() > 500 && p.rate() > 0;
            });
        } finally {
            p.close();
        }
        assertThrows(IllegalStateException.class, p::next);
        assertEquals(0, p.available());
    }

    @Test
    void refillsInRangesWhenTheClientAsksForThem() {
        UidClient c = UidClient.builder().connection(nc).batchEncoding(Encoding.RANGES).build();
        try (Prefetcher p = Prefetcher.builder(c).minBatch(2000).build()) {
            Set<Long> seen = new HashSet<>();
            seen.add(p.next());
            for (int i = 0; i < 10_000; i++) {
                assertTrue(seen.add(p.next()));
            }
        }
    }

    @Test
    void aBatchSizeTheServiceRefusesFailsNextAtOnce() {
        UidClient c = UidClient.builder().connection(nc).timeout(Duration.ofMinutes(1)).build();
        try (Prefetcher p = Prefetcher.builder(c).minBatch(200_000).build()) {
            BadRequestException e = assertThrows(BadRequestException.class, p::next);
            assertTrue(e.description().contains("too large"), e.description());
            assertEquals(0, c.stats().retries(), "a 400 is not retried");
        }
    }

    @Test
    void nextWaitsWithinTheClientsTimeoutAndSaysWhy() {
        UidClient c = UidClient.builder().connection(nc).subjectPrefix("nobody").timeout(Duration.ofMillis(400)).build();
        try (Prefetcher p = Prefetcher.of(c)) {
            GaveUpException e = assertThrows(GaveUpException.class, p::next);
            assertEquals(GaveUpException.Reason.DEADLINE, e.reason());
            // The cause is the refill's failure, once one has failed; before that, "no refill arrived".
            assertInstanceOf(UidException.class, e.getCause());
        }
    }
}
