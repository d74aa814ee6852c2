package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/** Everything handed out under concurrency, by every call and two prefetchers, with 0 duplicates. */
class UniquenessIT {
    @Test
    void noIdOrSequenceNumberTwiceAcrossConcurrentCallsClientsAndPrefetchers() throws Exception {
        try (TestEnv.NatsServer server = TestEnv.startNatsServer();
                TestEnv.Dispenser d = TestEnv.startDispenser(server.url(), Map.of("DISPENSER_SEQUENCES", "orders"));
                Connection nc1 = server.connect(); Connection nc2 = server.connect()) {
            UidClient a = UidClient.builder().connection(nc1).build();
            UidClient b = UidClient.builder().connection(nc2).build();
            ConcurrentLinkedQueue<Long> ids = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<Long> seq = new ConcurrentLinkedQueue<>();
            ExecutorService pool = Executors.newFixedThreadPool(9);
            try (Prefetcher pa = Prefetcher.builder(a).minBatch(1000).build();
                    Prefetcher pb = Prefetcher.builder(b).minBatch(700).maxBatch(700).build()) {
                List<Future<?>> work = new ArrayList<>();
                for (int w = 0; w < 8; w++) {
                    UidClient c = w % 2 == 0 ? a : b;
                    Prefetcher p = w % 2 == 0 ? pa : pb;
                    work.add(pool.submit(() -> {
                        for (int i = 0; i < 50; i++) {
                            ids.add(c.next());
                            ids.add(c.next(Encoding.BASE32));
                            for (long id : c.batch(200, i % 2 == 0 ? Encoding.BINARY : Encoding.DECIMAL)) {
                                ids.add(id);
                            }
                            for (int j = 0; j < 100; j++) {
                                ids.add(p.next());
                            }
                            seq.add(c.seqNext("orders"));
                        }
                        return null;
                    }));
                }
                work.add(pool.submit(() -> {
                    for (int i = 0; i < 20; i++) {
                        for (long n : b.seqBatch("orders", 100)) {
                            seq.add(n);
                        }
                    }
                    return null;
                }));
                for (Future<?> f : work) {
                    f.get();
                }
            } finally {
                pool.shutdown();
            }
            long total = 8L * 50 * 302;
            assertEquals(total, ids.size());
            assertEquals(total, ids.stream().distinct().count(), "duplicate IDs");
            assertEquals(8 * 50 + 20 * 100, seq.size());
            assertEquals(seq.size(), seq.stream().distinct().count(), "duplicate sequence numbers");
            // A sequence's numbers are dense: 2,400 numbers from one instance, no gap.
            long[] sorted = seq.stream().mapToLong(Long::longValue).sorted().toArray();
            assertEquals(sorted.length - 1, sorted[sorted.length - 1] - sorted[0], Arrays.toString(Arrays.copyOf(sorted, 5)));
            System.out.println("uniqueness: " + total + " IDs and " + seq.size() + " sequence numbers, 0 duplicates");
        }
    }
}
