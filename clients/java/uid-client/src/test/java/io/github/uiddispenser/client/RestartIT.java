package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Calls in flight across a dispenser's kill -9 and restart: they retry
 * (attempts that time out on the dead instance, then no responders) and
 * succeed once the new process answers, with no ID handed out twice.
 */
class RestartIT {
    @Test
    void callsInFlightSurviveAKill9AndRestart() throws Exception {
        try (TestEnv.NatsServer server = TestEnv.startNatsServer(); Connection nc = server.connect()) {
            TestEnv.Dispenser dispenser = TestEnv.startDispenser(server.url());
            UidClient client = UidClient.builder().connection(nc).timeout(Duration.ofSeconds(60))
                    .attemptTimeout(Duration.ofMillis(500)).build();
            Prefetcher p = Prefetcher.builder(client).minBatch(300).maxBatch(300).build();
            ConcurrentLinkedQueue<long[]> got = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            AtomicLong total = new AtomicLong();
            AtomicLong afterRestart = new AtomicLong();
            AtomicBoolean restarted = new AtomicBoolean();
            AtomicBoolean stop = new AtomicBoolean();
            // Callers that keep calling throughout, each call allowed 60 s: none may fail.
            List<Thread> callers = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                int kind = w;
                Thread t = new Thread(() -> {
                    while (!stop.get() && (!restarted.get() || afterRestart.get() < 40)) {
                        try {
                            long[] ids = kind == 0 ? new long[] {client.next()} : kind == 1 ? client.batch(50) : new long[] {p.next()};
                            got.add(ids);
                            total.addAndGet(ids.length);
                            if (restarted.get()) {
                                afterRestart.incrementAndGet();
                            }
                        } catch (RuntimeException e) {
                            failures.add(e);
                            return;
                        }
                    }
                });
                t.start();
                callers.add(t);
            }
            try {
                // The calls work before the fault.
                TestEnv.waitFor("IDs before the kill", Duration.ofSeconds(60), () -> total.get() > 500);
                dispenser.kill();
                long retriesAtKill = client.stats().retries();
                // Nobody answers now: the callers are retrying.
                TestEnv.waitFor("retries on no responders", Duration.ofSeconds(60), () -> client.stats().noResponders() > 0);
                long before = total.get();
                dispenser = TestEnv.startDispenser(server.url());
                restarted.set(true);
                for (Thread t : callers) {
                    t.join();
                }
                assertEquals(List.of(), List.copyOf(failures));
                assertTrue(afterRestart.get() >= 40 && total.get() > before, afterRestart + " calls after the restart");
                assertTrue(client.stats().retries() > retriesAtKill, client.stats().toString());
                Set<Long> seen = new HashSet<>();
                long n = 0;
                for (long[] ids : got) {
                    for (long id : ids) {
                        seen.add(id);
                        n++;
                    }
                }
                assertEquals(n, seen.size(), (n - seen.size()) + " duplicate IDs");
                System.out.println("restart: " + n + " IDs, " + afterRestart + " calls after the restart, 0 duplicates; " + client.stats());
            } finally {
                stop.set(true);
                for (Thread t : callers) {
                    t.join();
                }
                p.close();
                dispenser.close();
            }
        }
    }
}
