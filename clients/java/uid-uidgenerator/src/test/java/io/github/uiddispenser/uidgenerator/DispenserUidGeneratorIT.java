package io.github.uiddispenser.uidgenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.baidu.fsg.uid.UidGenerator;
import com.baidu.fsg.uid.exception.UidGenerateException;
import io.github.uiddispenser.client.GaveUpException;
import io.github.uiddispenser.client.Layout;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.time.Duration;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.Test;

/** The UidGenerator drop-in against the real dispenser. */
class DispenserUidGeneratorIT {
    @Test
    void getUidFromManyThreadsNoDuplicateAndParseUidAsTheDispenserReadsIt() throws Exception {
        try (TestEnv.NatsServer server = TestEnv.startNatsServer(); TestEnv.Dispenser d = TestEnv.startDispenser(server.url());
                Connection nc = server.connect()) {
            UidClient client = UidClient.builder().connection(nc).build();
            ConcurrentLinkedQueue<Long> ids = new ConcurrentLinkedQueue<>();
            try (DispenserUidGenerator gen = DispenserUidGenerator.of(client, Layout.DEFAULT)) {
                UidGenerator uidGenerator = gen; // as callers hold it
                List<Thread> threads = new ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    Thread th = new Thread(() -> {
                        for (int i = 0; i < 5000; i++) {
                            ids.add(uidGenerator.getUID());
                        }
                    });
                    th.start();
                    threads.add(th);
                }
                for (Thread th : threads) {
                    th.join();
                }
                assertEquals(40_000, ids.size());
                assertEquals(40_000, ids.stream().distinct().count(), "duplicate IDs");
                assertTrue(ids.stream().allMatch(id -> id > 0));
                // parseUID of an issued ID (in UTC) is the dispenser's own uid.parse.
                long id = ids.peek();
                DispenserUidGenerator utc = new DispenserUidGenerator(io.github.uiddispenser.client.Prefetcher.of(client), Layout.DEFAULT, ZoneOffset.UTC);
                try {
                    assertEquals(client.parse(id, "default").json(), utc.parseUID(id));
                } finally {
                    utc.close();
                }
            }
        }
    }

    @Test
    void noIdIsAUidGenerateExceptionAsUidGeneratorThrew() throws Exception {
        try (TestEnv.NatsServer server = TestEnv.startNatsServer(); Connection nc = server.connect()) {
            UidClient nobody = UidClient.builder().connection(nc).timeout(Duration.ofMillis(300)).build();
            try (DispenserUidGenerator gen = DispenserUidGenerator.of(nobody, Layout.DEFAULT)) {
                UidGenerateException e = assertThrows(UidGenerateException.class, gen::getUID);
                assertInstanceOf(GaveUpException.class, e.getCause());
            }
        }
    }
}
