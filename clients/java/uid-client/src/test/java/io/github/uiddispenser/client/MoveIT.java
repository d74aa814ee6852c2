package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.Message;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.api.KeyValueConfiguration;
import io.nats.client.api.Placement;
import io.nats.client.api.StorageType;
import java.io.IOException;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A client whose NATS server is cut off from its cluster: nodes A and B,
 * the dispenser on B, the client on A knowing both. Once the route between
 * them is cut, A has no responders for {@code uid.next}; the client moves
 * itself to B and its calls succeed, with no ID twice. With the move off
 * (moveAfter 0), a connection that knows A alone or one that does not
 * reconnect, its calls keep failing and the connection is left as it is.
 */
class MoveIT {
    private static final Duration WITHIN = Duration.ofSeconds(60);
    /** The client's logger under java.util.logging (System.Logger's default backend), held: JUL keeps loggers weakly. */
    private static final Logger CLIENT_LOG = Logger.getLogger(UidClient.class.getName());
    private static TestEnv.Cluster cluster;
    private static TestEnv.Dispenser dispenser;

    @BeforeAll
    static void start() throws Exception {
        cluster = TestEnv.startCluster();
        try (Connection nc = cluster.b().connect()) {
            // The worker-ID bucket on B alone (one replica, tag b): the
            // dispenser on B keeps its lease through the cut.
            KeyValueConfiguration bucket = KeyValueConfiguration.builder().name("uid_workers").maxHistoryPerKey(1)
                    .storageType(StorageType.File).replicas(1).placement(Placement.builder().tags("b").build()).build();
            TestEnv.waitFor("JetStream to create the worker-ID bucket on B", WITHIN, () -> {
                try {
                    nc.keyValueManagement().create(bucket);
                    return true;
                } catch (IOException | JetStreamApiException e) {
                    return false; // no meta leader yet
                }
            });
            assertEquals("B", nc.jetStreamManagement().getStreamInfo("KV_uid_workers").getClusterInfo().getLeader());
        }
        dispenser = TestEnv.startDispenser(cluster.b().url());
    }

    @AfterAll
    static void stop() {
        if (dispenser != null) {
            dispenser.close();
        }
        if (cluster != null) {
            cluster.close();
        }
    }

    @BeforeEach
    void joined() {
        cluster.heal();
        TestEnv.waitFor("the dispenser on B to answer through A", WITHIN, () -> answersThrough(cluster.a()));
    }

    @Test
    void callsMoveOffAServerCutOffFromItsCluster() throws Exception {
        List<String> logged = new ArrayList<>();
        Handler capture = capture(logged);
        // A password in the URL (the servers ignore it) must not reach the log.
        String a = cluster.a().url().replace("nats://", "nats://uidtest:s3cret@");
        try (UidClient ids = UidClient.builder().natsOptions(twoServers(a)).timeout(WITHIN).build()) {
            Connection nc = ids.connection();
            assertEquals(port(cluster.a().url()), port(nc.getConnectedUrl()));
            ids.next();
            cut();
            ConcurrentLinkedQueue<long[]> got = new ConcurrentLinkedQueue<>();
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                List<Future<?>> work = new ArrayList<>();
                for (int w = 0; w < 4; w++) {
                    boolean batches = w % 2 == 1;
                    work.add(pool.submit(() -> {
                        for (int i = 0; i < 25; i++) {
                            got.add(batches ? ids.batch(100) : new long[] {ids.next()});
                        }
                        return null;
                    }));
                }
                for (Future<?> f : work) {
                    f.get(); // a failed call fails the test here
                }
            } finally {
                pool.shutdown();
            }
            assertEquals(port(cluster.b().url()), port(nc.getConnectedUrl()), "the connection is on B");
            ClientStats stats = ids.stats();
            assertTrue(stats.moves() >= 1 && stats.noResponders() + stats.timedOut() >= 2, stats.toString());
            long n = got.stream().mapToLong(x -> x.length).sum();
            assertEquals(2 * 25 + 2 * 25 * 100, n);
            assertEquals(n, got.stream().flatMapToLong(java.util.Arrays::stream).distinct().count(), "duplicate IDs");
        } finally {
            CLIENT_LOG.removeHandler(capture);
        }
        String moved = logged.stream().filter(m -> m.contains("event=client.moved")).findFirst().orElse("");
        assertTrue(moved.contains("server=nats://127.0.0.1:" + port(cluster.a().url())), logged.toString());
        assertFalse(logged.stream().anyMatch(m -> m.contains("s3cret") || m.contains("uidtest")), logged.toString());
    }

    @Test
    void withTheMoveOffCallsKeepFailingThroughTheCutOffServer() throws Exception {
        try (UidClient ids = UidClient.builder().natsOptions(twoServers(cluster.a().url())).moveAfter(0)
                .timeout(Duration.ofSeconds(1)).build()) {
            callsFailOnA(ids);
        }
    }

    @Test
    void aConnectionThatKnowsOneServerStaysOnIt() throws Exception {
        Options aAlone = new Options.Builder().server(cluster.a().url()).ignoreDiscoveredServers().maxReconnects(-1).build();
        try (UidClient ids = UidClient.builder().natsOptions(aAlone).timeout(Duration.ofSeconds(1)).build()) {
            callsFailOnA(ids);
        }
    }

    @Test
    void aConnectionThatDoesNotReconnectIsLeftAlone() throws Exception {
        // forceReconnect would close a connection with maxReconnects(0): the client must not call it.
        Options noReconnect = new Options.Builder().servers(new String[] {cluster.a().url(), cluster.b().url()}).noRandomize()
                .maxReconnects(0).build();
        try (UidClient ids = UidClient.builder().natsOptions(noReconnect).timeout(Duration.ofSeconds(1)).build()) {
            callsFailOnA(ids);
        }
    }

    /**
     * A timeout neither counts toward a move nor resets the count (a paused or
     * slow server times requests out too): a subscriber on A that never
     * answers times out every attempt of a client on A that knows B, and after
     * ten times the attempts a move needs the connection has never moved.
     */
    @Test
    void timeoutsDoNotCountTowardAMove() throws Exception {
        try (Connection silent = cluster.a().connect();
                UidClient ids = UidClient.builder().natsOptions(twoServers(cluster.a().url())).subjectPrefix("silent")
                        .timeout(Duration.ofSeconds(1)).attemptTimeout(Duration.ofMillis(20))
                        .backoff(Duration.ofMillis(1), Duration.ofMillis(10)).build()) {
            silent.subscribe("silent.next"); // never answered
            silent.flush(WITHIN);
            while (ids.stats().timedOut() < 10L * UidClient.DEFAULT_MOVE_AFTER) {
                GaveUpException e = assertThrows(GaveUpException.class, ids::next);
                assertTrue(e.getCause() instanceof AttemptTimeoutException, String.valueOf(e.getCause()));
            }
            ClientStats stats = ids.stats();
            assertEquals(0, stats.moves(), stats.toString());
            assertEquals(0, stats.noResponders(), stats.toString());
            assertEquals(port(cluster.a().url()), port(ids.connection().getConnectedUrl()));
            assertEquals(0, ids.connection().getStatistics().getReconnects());
        }
    }

    /**
     * Moves are spaced by moveEvery: with no dispenser on the prefix, A and B
     * both answer no responders (as if each were cut off in turn), and a
     * client with a moveEvery of an hour moves once, off A, however many no
     * responders follow on B.
     */
    @Test
    void twoCutOffsWithinMoveEveryMoveOnce() throws Exception {
        try (UidClient ids = noDispenserClient(Duration.ofHours(1))) {
            while (ids.stats().noResponders() < 20L * UidClient.DEFAULT_MOVE_AFTER) {
                assertThrows(UidException.class, ids::next);
            }
            ClientStats stats = ids.stats();
            assertEquals(1, stats.moves(), stats.toString());
            TestEnv.waitFor("the move's reconnect", WITHIN, () -> ids.connection().getStatus() == Connection.Status.CONNECTED);
            assertEquals(port(cluster.b().url()), port(ids.connection().getConnectedUrl()), "the connection is on B");
        }
    }

    /** The control of {@link #twoCutOffsWithinMoveEveryMoveOnce}: with a moveEvery of a millisecond, it moves again and again. */
    @Test
    void withAShortMoveEveryItMovesAgain() throws Exception {
        try (UidClient ids = noDispenserClient(Duration.ofMillis(1))) {
            while (ids.stats().moves() < 3 && ids.stats().noResponders() < 200) {
                assertThrows(UidException.class, ids::next);
            }
            assertTrue(ids.stats().moves() >= 3, ids.stats().toString());
        }
    }

    /**
     * Two clients of two fleets share a connection, each with its own count:
     * once one of them moved the connection, the other takes that reconnect
     * for a move of its own, and with a moveEvery of an hour the connection
     * moves once, off A, however many no responders both clients then get on
     * B. Without that rule the second client moved it again at once, off the
     * server just reached (the Go client's fault-harness finding).
     */
    @Test
    void twoClientsSharingAConnectionMoveItOnce() throws Exception {
        try (Connection nc = Nats.connect(twoServers(cluster.a().url()));
                UidClient first = noDispenserClient(UidClient.builder().connection(nc), "nobody", Duration.ofHours(1));
                UidClient second = noDispenserClient(UidClient.builder().connection(nc), "nobody2", Duration.ofHours(1))) {
            while (first.stats().moves() == 0 && first.stats().noResponders() < 200) {
                assertThrows(UidException.class, first::next);
            }
            assertEquals(1, first.stats().moves(), first.stats().toString());
            TestEnv.waitFor("the move's reconnect", WITHIN,
                    () -> nc.getStatistics().getReconnects() == 1 && nc.getStatus() == Connection.Status.CONNECTED);
            assertEquals(port(cluster.b().url()), port(nc.getConnectedUrl()), "the connection is on B");
            long firstBefore = first.stats().noResponders();
            while (second.stats().noResponders() < 20L * UidClient.DEFAULT_MOVE_AFTER
                    || first.stats().noResponders() < firstBefore + 20L * UidClient.DEFAULT_MOVE_AFTER) {
                assertThrows(UidException.class, second::next);
                assertThrows(UidException.class, first::next);
            }
            assertEquals(0, second.stats().moves(), second.stats().toString());
            assertEquals(1, first.stats().moves(), first.stats().toString());
            assertEquals(1, nc.getStatistics().getReconnects());
            assertEquals(port(cluster.b().url()), port(nc.getConnectedUrl()), "the connection is on B");
        }
    }

    /** A client on A, knowing B, of the subject prefix no dispenser serves. */
    private static UidClient noDispenserClient(Duration moveEvery) {
        return noDispenserClient(UidClient.builder().natsOptions(twoServers(cluster.a().url())), "nobody", moveEvery);
    }

    /** A client of b, of a subject prefix no dispenser serves, its moves at least moveEvery apart. */
    private static UidClient noDispenserClient(UidClient.Builder b, String prefix, Duration moveEvery) {
        return b.subjectPrefix(prefix).moveEvery(moveEvery).timeout(Duration.ofMillis(100))
                .backoff(Duration.ofMillis(1), Duration.ofMillis(10)).build();
    }

    /** Cuts A off from B and asserts that three calls of ids, on A, fail there, and nothing moved. */
    private static void callsFailOnA(UidClient ids) {
        ids.next();
        cut();
        for (int i = 0; i < 3; i++) {
            GaveUpException e = assertThrows(GaveUpException.class, ids::next);
            assertTrue(e.getCause() instanceof NoRespondersException || e.getCause() instanceof AttemptTimeoutException,
                    String.valueOf(e.getCause()));
        }
        assertEquals(Connection.Status.CONNECTED, ids.connection().getStatus());
        assertEquals(port(cluster.a().url()), port(ids.connection().getConnectedUrl()));
        ClientStats stats = ids.stats();
        assertEquals(0, stats.moves(), stats.toString());
        // Far more failed attempts in a row than the default move needs.
        assertTrue(stats.noResponders() + stats.timedOut() >= 3 * UidClient.DEFAULT_MOVE_AFTER, stats.toString());
    }

    /** Cuts A off from B and waits until A has dropped the dispenser's subscriptions. */
    private static void cut() {
        cluster.cut();
        TestEnv.waitFor("A to drop the subscriptions of B", WITHIN, () -> !answersThrough(cluster.a()));
    }

    /** The client's options: A first, then B, in that order, each reconnect quick. */
    private static Options twoServers(String a) {
        return new Options.Builder().servers(new String[] {a, cluster.b().url()}).noRandomize().maxReconnects(-1)
                .reconnectWait(Duration.ofMillis(50)).build();
    }

    /** Whether a dispenser answers uid.next through server. */
    private static boolean answersThrough(TestEnv.NatsServer server) {
        try (Connection nc = server.connect()) {
            Message m = nc.request("uid.next", new byte[0], Duration.ofMillis(500));
            return m != null && !m.isStatusMessage();
        } catch (IOException | RuntimeException e) {
            return false; // no responders
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static int port(String url) {
        return URI.create(url).getPort();
    }

    private static Handler capture(List<String> into) {
        Handler h = new Handler() {
            @Override
            public void publish(LogRecord r) {
                synchronized (into) {
                    into.add(r.getLevel() + " " + r.getMessage());
                }
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        CLIENT_LOG.addHandler(h);
        return h;
    }
}
