package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import io.nats.client.Dispatcher;
import io.nats.client.impl.Headers;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.ContextPropagators;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** Every call of the client against the real dispenser binary on a real nats-server, and its errors. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClientIT {
    // The dispenser runs on a prefix of its own and the default 31/10/22 layout.
    private static final String PREFIX = "javauid";
    private TestEnv.NatsServer server;
    private TestEnv.Dispenser dispenser;
    private Connection nc;
    private UidClient ids;

    @BeforeAll
    void start() throws Exception {
        server = TestEnv.startNatsServer();
        dispenser = TestEnv.startDispenser(server.url(), Map.of("DISPENSER_SUBJECT_PREFIX", PREFIX,
                "DISPENSER_SEQUENCES", "orders,invoices=1000000"));
        nc = server.connect();
        ids = UidClient.builder().connection(nc).subjectPrefix(PREFIX).build();
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
    void nextGivesIncreasingIdsInEveryEncoding() {
        long a = ids.next();
        long b = ids.next(Encoding.BASE32);
        long c = ids.next(Encoding.BINARY); // answered in decimal
        assertTrue(a > 1L << 53, "an ID of the default layout is above 2^53: " + a);
        assertTrue(b > a && c > b, a + " " + b + " " + c);
    }

    @Test
    void batchDecodesEveryWireEncodingToTheSameKindOfIds() {
        long last = 0;
        Set<Long> seen = new HashSet<>();
        for (Encoding e : new Encoding[] {Encoding.BINARY, Encoding.BASE32, Encoding.DECIMAL}) {
            long[] batch = ids.batch(500, e);
            assertEquals(500, batch.length, e.name());
            for (long id : batch) {
                assertTrue(id > last, e + ": " + id + " after " + last);
                assertTrue(seen.add(id));
                last = id;
            }
        }
        assertEquals(1500, seen.size());
        assertEquals(1000, ids.batch(1000).length, "binary by default");
    }

    @Test
    void batchAsRanges() {
        long[] batch = ids.batch(20_000, Encoding.RANGES);
        assertEquals(20_000, batch.length);
        for (int i = 1; i < batch.length; i++) {
            assertTrue(batch[i] > batch[i - 1], batch[i] + " after " + batch[i - 1]);
        }
        long[] runs = UidClient.builder().connection(nc).subjectPrefix(PREFIX).batchEncoding(Encoding.RANGES).build().batchRuns(5000);
        assertEquals(5000, Wire.countOf(runs));
        long[] seq = ids.seqBatch("invoices", 10, Encoding.RANGES);
        for (int i = 1; i < seq.length; i++) {
            assertEquals(seq[i - 1] + 1, seq[i], "a sequence's numbers are dense");
        }
    }

    @Test
    void parseSplitsAnIdAsTheLocalLayoutDoes() {
        long id = ids.next();
        Parts p = ids.parse(id);
        assertEquals(id, p.id());
        assertEquals(id, Layout.DEFAULT.pack(Layout.DEFAULT.deltaSeconds(id), p.workerId(), p.sequence()));
        assertEquals(Layout.DEFAULT.time(id), p.time());
        assertTrue(Math.abs(Duration.between(p.time(), Instant.now()).toSeconds()) < 60, p.time().toString());
        // The server's parseUID JSON and the local one agree.
        ParsedUid j = ids.parse(id, "default");
        assertEquals(Layout.DEFAULT.parseUID(id, ZoneOffset.UTC), j.json());
        assertTrue(j.wrapped().isEmpty());
    }

    @Test
    void parseWithUidGeneratorsLayoutReadsWrappedIds() {
        for (long old : new long[] {-7024218214296920064L, 9223372002495045632L, 2616391013900288L}) {
            ParsedUid p = ids.parse(old, "uidgenerator");
            assertEquals(Long.toString(old), p.uid());
            Map<String, String> local = Json.stringObject(Layout.UIDGENERATOR.parseUID(old, ZoneOffset.UTC));
            assertEquals(local.get("timestamp"), p.timestamp());
            assertEquals(local.get("workerId"), p.workerId());
            assertEquals(local.get("sequence"), p.sequence());
            assertEquals(old < 0, p.wrapped().isPresent(), p.json());
        }
        BadRequestException bad = assertThrows(BadRequestException.class, () -> ids.parse(5, "nosuch"));
        assertTrue(bad.description().contains("nosuch"), bad.description());
    }

    @Test
    void sequencesAreDenseAndIncreasing() {
        long first = ids.seqNext("invoices");
        assertTrue(first >= 1_000_000, Long.toString(first));
        assertArrayEquals(new long[] {first + 1, first + 2, first + 3}, ids.seqBatch("invoices", 3));
        assertEquals(first + 4, ids.seqNext("invoices", Encoding.BASE32));
        assertArrayEquals(new long[] {first + 5, first + 6}, ids.seqBatch("invoices", 2, Encoding.BASE32));
        assertArrayEquals(new long[] {first + 7}, ids.seqBatch("invoices", 1, Encoding.DECIMAL));
    }

    @Test
    void aBadCountOrNameIsRefusedBeforeAnyRequest() {
        UidClient c = UidClient.builder().connection(nc).subjectPrefix(PREFIX).build();
        for (int n : new int[] {0, -1}) {
            assertThrows(BadRequestException.class, () -> c.batch(n));
            assertThrows(BadRequestException.class, () -> c.seqBatch("orders", n));
        }
        for (String name : new String[] {"", "a.b", "a b", "*", ">"}) {
            assertThrows(BadRequestException.class, () -> c.seqNext(name), name);
        }
        assertEquals(0, c.stats().requests());
    }

    @Test
    void theServers400And404ComeBackAtOnce() {
        UidClient c = UidClient.builder().connection(nc).subjectPrefix(PREFIX).build();
        BadRequestException big = assertThrows(BadRequestException.class, () -> c.batch(200_000));
        assertEquals(400, big.code());
        assertTrue(big.description().contains("too large: at most 100000"), big.description());
        assertEquals(PREFIX + ".batch", big.subject());
        assertThrows(BadRequestException.class, () -> c.parse(-5));
        UnknownSequenceException u = assertThrows(UnknownSequenceException.class, () -> c.seqNext("nosuch"));
        assertEquals(404, u.code());
        assertTrue(u.description().contains("unknown sequence \"nosuch\""), u.description());
        assertThrows(UnknownSequenceException.class, () -> c.seqBatch("nosuch", 3));
        assertEquals(0, c.stats().retries());
        assertEquals(4, c.stats().requests());
    }

    @Test
    void withNobodySubscribedTheClientRetriesUntilTheDeadline() {
        UidClient c = UidClient.builder().connection(nc).subjectPrefix("nobody").timeout(Duration.ofMillis(300)).build();
        GaveUpException e = assertThrows(GaveUpException.class, c::next);
        assertEquals(GaveUpException.Reason.DEADLINE, e.reason());
        assertTrue(e.attempts() > 3, e.attempts() + " attempts");
        assertInstanceOf(NoRespondersException.class, e.getCause());
        assertTrue(c.stats().noResponders() > 3, c.stats().toString());
        assertEquals(c.stats().retries(), c.stats().noResponders() - 1);
    }

    @Test
    void aRangesReplyClaimingMoreThanAskedIsRefusedBeforeItIsExpanded() throws Exception {
        // One 16-byte run of 2^30 IDs: expanded, 8 GiB of longs (an
        // OutOfMemoryError); refused on its count, an error naming both.
        byte[] huge = java.nio.ByteBuffer.allocate(Wire.RUN_WIDTH).putLong(1000).putLong(1L << 30).array();
        Dispatcher liar = nc.createDispatcher(m -> nc.publish(m.getReplyTo(), huge));
        liar.subscribe("liar.batch");
        liar.subscribe("liar.seq.orders.batch");
        nc.flush(Duration.ofSeconds(5));
        try {
            UidClient c = UidClient.builder().connection(nc).subjectPrefix("liar").build();
            UidException e = assertThrows(UidException.class, () -> c.batch(5, Encoding.RANGES));
            assertTrue(e.getMessage().contains("asked for 5 IDs, the reply holds 1073741824"), e.getMessage());
            e = assertThrows(UidException.class, () -> c.seqBatch("orders", 5, Encoding.RANGES));
            assertTrue(e.getMessage().contains("asked for 5 IDs, the reply holds 1073741824"), e.getMessage());
        } finally {
            nc.closeDispatcher(liar);
        }
    }

    @Test
    void anAttemptWithoutAReplyIsRetried() throws Exception {
        // A responder that holds every request and never answers: an instance that died holding it.
        Dispatcher silent = nc.createDispatcher(m -> {
        });
        silent.subscribe("silent.next");
        nc.flush(Duration.ofSeconds(5));
        try {
            UidClient c = UidClient.builder().connection(nc).subjectPrefix("silent").timeout(Duration.ofMillis(700))
                    .attemptTimeout(Duration.ofMillis(100)).build();
            GaveUpException e = assertThrows(GaveUpException.class, c::next);
            assertInstanceOf(AttemptTimeoutException.class, e.getCause());
            assertTrue(c.stats().timedOut() >= 2, c.stats().toString());
        } finally {
            nc.closeDispatcher(silent);
        }
    }

    @Test
    void anInterruptEndsTheRetries() throws Exception {
        UidClient c = UidClient.builder().connection(nc).subjectPrefix("nobody").timeout(Duration.ofMinutes(5)).build();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicReference<Boolean> flag = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                c.next();
            } catch (Throwable e) {
                thrown.set(e);
                flag.set(Thread.currentThread().isInterrupted());
            }
        });
        t.start();
        TestEnv.waitFor("a retry", Duration.ofSeconds(30), () -> c.stats().retries() > 0);
        t.interrupt();
        t.join();
        GaveUpException e = assertInstanceOf(GaveUpException.class, thrown.get());
        assertEquals(GaveUpException.Reason.INTERRUPTED, e.reason());
        assertTrue(flag.get(), "the interrupt flag is set again");
    }

    @Test
    void aHomedSequenceWhoseHomeCannotBeReachedNamesIt() throws Exception {
        // A fleet of regions as a client cut off from east sees it: nobody serves
        // orders' next and batch here; the local instances answer .home.
        String p = "homed";
        Dispatcher d = nc.createDispatcher(m -> {
            if (m.getSubject().equals(p + ".seq.orders.home")) {
                nc.publish(m.getReplyTo(), "east".getBytes(StandardCharsets.US_ASCII));
            } else {
                nc.publish(m.getReplyTo(), new Headers().put(Protocol.ERROR_CODE_HEADER, "404")
                        .put(Protocol.ERROR_HEADER, "unknown sequence \"nosuch\""), new byte[0]);
            }
        });
        d.subscribe(p + ".seq.orders.home");
        d.subscribe(p + ".seq.nosuch.home");
        nc.flush(Duration.ofSeconds(5));
        try {
            UidClient c = UidClient.builder().connection(nc).subjectPrefix(p).homeWait(Duration.ofMillis(200)).build();
            for (Runnable call : List.<Runnable>of(() -> c.seqNext("orders"), () -> c.seqBatch("orders", 2))) {
                HomeUnreachableException e = assertThrows(HomeUnreachableException.class, call::run);
                assertEquals("east", e.home());
                assertEquals("orders", e.sequence());
                assertTrue(e.getMessage().contains("home region east"), e.getMessage());
            }
            // Asked again while the home wait lasted, not given up at the first no responders.
            assertTrue(c.stats().noResponders() >= 4, c.stats().toString());
            UidClient once = UidClient.builder().connection(nc).subjectPrefix(p).build();
            assertThrows(UnknownSequenceException.class, () -> once.seqNext("nosuch"));
            assertEquals(0, once.stats().retries());
            // The home back within the wait (a gateway link reconnecting): the waiting call is served.
            UidClient patient = UidClient.builder().connection(nc).subjectPrefix(p).homeWait(Duration.ofMinutes(1))
                    .timeout(Duration.ofMinutes(1)).build();
            CompletableFuture<Long> served = CompletableFuture.supplyAsync(() -> patient.seqNext("orders"));
            TestEnv.waitFor("the call to meet no responders", Duration.ofSeconds(30), () -> patient.stats().noResponders() > 0);
            Dispatcher east = nc.createDispatcher(m -> nc.publish(m.getReplyTo(), "7".getBytes(StandardCharsets.US_ASCII)));
            east.subscribe(p + ".seq.orders.next");
            try {
                assertEquals(7L, served.get());
            } finally {
                nc.closeDispatcher(east);
            }
            // Nobody answers .home (no instance, or no regions): retried as before.
            GaveUpException e = assertThrows(GaveUpException.class,
                    () -> c.withTimeout(Duration.ofMillis(300)).seqNext("other"));
            assertTrue(e.attempts() > 1, e.getMessage());
        } finally {
            nc.closeDispatcher(d);
        }
    }

    @Test
    void traceContextGoesInTheHeadersWhenOpenTelemetryIsThere() throws Exception {
        List<String> seen = new CopyOnWriteArrayList<>();
        Dispatcher d = nc.createDispatcher(m -> {
            String tp = m.hasHeaders() ? m.getHeaders().getFirst("traceparent") : null;
            seen.add(String.valueOf(tp));
            nc.publish(m.getReplyTo(), "42".getBytes(StandardCharsets.US_ASCII));
        });
        d.subscribe("traced.next");
        nc.flush(Duration.ofSeconds(5));
        GlobalOpenTelemetry.resetForTest();
        GlobalOpenTelemetry.set(OpenTelemetry.propagating(ContextPropagators.create(W3CTraceContextPropagator.getInstance())));
        try {
            UidClient c = UidClient.builder().connection(nc).subjectPrefix("traced").build();
            String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
            Span parent = Span.wrap(SpanContext.create(traceId, "00f067aa0ba902b7", TraceFlags.getSampled(), TraceState.getDefault()));
            try (Scope s = parent.makeCurrent()) {
                assertEquals(42, c.next());
            }
            assertEquals(42, c.next()); // no current trace: nothing to carry
            assertEquals(2, seen.size());
            assertTrue(seen.get(0).startsWith("00-" + traceId + "-"), seen.get(0));
            assertEquals("null", seen.get(1));
        } finally {
            GlobalOpenTelemetry.resetForTest();
            nc.closeDispatcher(d);
        }
    }

    @Test
    void aClientMadeFromAUrlOwnsItsConnection() {
        UidClient own = UidClient.builder().url(server.url()).subjectPrefix(PREFIX).build();
        Connection c = own.connection();
        own.withTimeout(Duration.ofSeconds(1)).close(); // a copy closes nothing
        assertEquals(Connection.Status.CONNECTED, c.getStatus());
        assertTrue(own.next() > 0);
        own.close();
        assertEquals(Connection.Status.CLOSED, c.getStatus());
        UidException closed = assertThrows(UidException.class, own::next);
        assertNotNull(closed.getMessage());
        // The application's connection stays open.
        UidClient given = UidClient.builder().connection(nc).build();
        given.close();
        assertEquals(Connection.Status.CONNECTED, nc.getStatus());
        assertThrows(UidException.class, () -> UidClient.builder().url("nats://127.0.0.1:1").build());
        assertNull(UidClient.header(new io.nats.client.impl.NatsMessage("x", null, new byte[0]), "y"));
    }
}
