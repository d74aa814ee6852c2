package io.github.uiddispenser.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import io.nats.client.Dispatcher;
import io.nats.client.JetStreamStatusException;
import io.nats.client.Message;
import io.nats.client.impl.Headers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * protocol/cases.json, the cases every client runs (protocol/README.md):
 * the live cases as raw requests against the dispenser binary, the replies
 * section through this client against a plain responder, and the client's
 * retry of a live 503.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class CasesIT {
    private JsonNode file;
    private TestEnv.NatsServer server;
    private TestEnv.Dispenser dispenser;
    private Connection nc;
    private final Set<Integer> codes = new TreeSet<>();

    @BeforeAll
    void start() throws Exception {
        file = new ObjectMapper().readTree(TestEnv.repoRoot().resolve("protocol/cases.json").toFile());
        server = TestEnv.startNatsServer();
        Map<String, String> env = new HashMap<>();
        file.get("dispenser").get("env").fields().forEachRemaining(e -> env.put(e.getKey(), e.getValue().asText()));
        dispenser = TestEnv.startDispenser(server.url(), env);
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

    // First: the sequence cases count from the first number; the last case drains the instance.
    @Order(1)
    @TestFactory
    Stream<DynamicTest> liveCasesInFileOrder() {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : file.get("cases")) {
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> runCase(c)));
        }
        tests.add(DynamicTest.dynamicTest("the live cases cover every code a dispenser can be made to send",
                () -> assertEquals(Set.of(400, 404, 503), codes)));
        return tests.stream();
    }

    private void runCase(JsonNode c) throws InterruptedException {
        JsonNode req = c.get("request");
        Headers h = new Headers();
        req.get("headers").fields().forEachRemaining(e -> h.put(e.getKey(), e.getValue().asText()));
        Message reply = null;
        Throwable err = null;
        try {
            reply = nc.requestWithTimeout(req.get("subject").asText(), h.isEmpty() ? null : h,
                    req.get("body").asText().getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(5)).get(5, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            err = e.getCause();
        } catch (CancellationException | java.util.concurrent.TimeoutException e) {
            err = e;
        }
        List<String> problems = check(c.get("reply"), reply, err);
        if (c.has("pending")) {
            Assumptions.assumeTrue(problems.isEmpty(), "pending (" + c.get("pending").asText() + "): " + problems);
            System.out.println("case \"" + c.get("name").asText() + "\" is pending but passes now: remove its pending mark");
        }
        assertEquals(List.of(), problems);
        JsonNode e = c.get("reply").get("error");
        if (e != null && !e.isNull() && !c.has("pending")) {
            codes.add(e.get("code").asInt());
        }
    }

    /** What differs between a reply and the case: nothing when it passes. */
    private static List<String> check(JsonNode want, Message reply, Throwable err) {
        List<String> problems = new ArrayList<>();
        if (want.path("no_responders").asBoolean(false)) {
            boolean noResponders = err instanceof CancellationException
                    || (err instanceof JetStreamStatusException && ((JetStreamStatusException) err).getStatus().getCode() == 503);
            if (!noResponders) {
                problems.add("want no responders, got " + (reply != null ? "a reply" : String.valueOf(err)));
            }
            return problems;
        }
        if (reply == null) {
            problems.add("request: " + err);
            return problems;
        }
        String code = orEmpty(UidClient.header(reply, Protocol.ERROR_CODE_HEADER));
        String description = orEmpty(UidClient.header(reply, Protocol.ERROR_HEADER));
        JsonNode e = want.get("error");
        boolean wantError = e != null && !e.isNull();
        if (!wantError && !code.isEmpty()) {
            problems.add("want a reply, got error " + code + " \"" + description + "\"");
        } else if (wantError && !code.equals(e.get("code").asText())) {
            problems.add("want error " + e.get("code").asText() + ", got code \"" + code + "\" (" + description + ")");
        } else if (wantError && !description.contains(e.get("description_contains").asText())) {
            problems.add("error description \"" + description + "\" does not contain \"" + e.get("description_contains").asText() + "\"");
        }
        if (want.has("headers")) {
            want.get("headers").fields().forEachRemaining(hd -> {
                String v = orEmpty(UidClient.header(reply, hd.getKey()));
                if (v.isEmpty() || !Pattern.compile(hd.getValue().asText()).matcher(v).find()) {
                    problems.add("header " + hd.getKey() + " = \"" + v + "\", want a value matching " + hd.getValue().asText());
                }
            });
        }
        try {
            checkBody(want.get("body"), reply.getData() == null ? new byte[0] : reply.getData());
        } catch (AssertionError | RuntimeException x) {
            problems.add("body: " + x.getMessage());
        }
        return problems;
    }

    private static final Pattern DECIMAL = Pattern.compile("^(0|[1-9][0-9]*)$");
    private static final Pattern BASE32 = Pattern.compile("^[0-9A-HJKMNP-TV-Z]{13}$");

    private static void checkBody(JsonNode want, byte[] data) {
        String type = want.get("type").asText();
        String text = new String(data, StandardCharsets.UTF_8);
        switch (type) {
            case "empty":
                assertEquals(0, data.length, "want empty, got " + Wire.shorten(text, 80));
                return;
            case "decimal":
            case "base32": {
                long id = type.equals("decimal") ? decimal(text) : base32(text);
                if (want.has("equals")) {
                    assertEquals(want.get("equals").asText(), Long.toString(id));
                }
                return;
            }
            case "decimal_lines":
            case "base32_lines":
            case "binary":
            case "ranges": {
                long[] ids;
                if (type.equals("binary")) {
                    ids = Wire.decodeBinary(data);
                } else if (type.equals("ranges")) {
                    ids = Wire.expand(Wire.decodeRuns(data));
                } else {
                    String[] lines = text.split("\n", -1);
                    ids = new long[lines.length];
                    for (int i = 0; i < lines.length; i++) {
                        ids[i] = type.equals("base32_lines") ? base32(lines[i]) : decimal(lines[i]);
                    }
                }
                assertEquals(want.get("count").asLong(), ids.length, "count");
                boolean dense = want.path("dense").asBoolean(false);
                for (int i = 1; i < ids.length; i++) {
                    assertTrue(ids[i] > ids[i - 1] && (!dense || ids[i] == ids[i - 1] + 1),
                            "ID " + ids[i] + " after " + ids[i - 1] + ": not increasing (dense " + dense + ")");
                }
                if (want.has("first")) {
                    assertEquals(want.get("first").asText(), Long.toString(ids[0]), "first");
                }
                if (want.has("runs")) {
                    assertEquals(want.get("runs").asInt(), Wire.decodeRuns(data).length / 2, "runs");
                }
                return;
            }
            case "json": {
                JsonNode obj;
                try {
                    obj = new ObjectMapper().readTree(text);
                } catch (java.io.IOException x) {
                    throw new AssertionError("not JSON: " + text);
                }
                for (JsonNode k : want.path("keys_include")) {
                    assertTrue(obj.has(k.asText()), "no key " + k.asText());
                }
                if (want.has("keys")) {
                    Set<String> got = new TreeSet<>();
                    obj.fieldNames().forEachRemaining(got::add);
                    Set<String> keys = new TreeSet<>();
                    want.get("keys").forEach(k -> keys.add(k.asText()));
                    assertEquals(keys, got, "keys");
                    for (Iterator<Map.Entry<String, JsonNode>> it = obj.fields(); it.hasNext();) {
                        Map.Entry<String, JsonNode> f = it.next();
                        assertTrue(f.getValue().isTextual(), "value of " + f.getKey() + " is not a string");
                    }
                }
                want.path("values").fields().forEachRemaining(v ->
                        assertEquals(v.getValue().asText(), obj.path(v.getKey()).asText(null), v.getKey()));
                return;
            }
            default:
                fail("unknown body type \"" + type + "\" in the cases file");
        }
    }

    private static long decimal(String s) {
        assertTrue(DECIMAL.matcher(s).matches(), "\"" + Wire.shorten(s, 40) + "\" is not a decimal ID");
        return Wire.decimalId(s);
    }

    // A server sends upper case: the decoder also takes lower case, so check first.
    private static long base32(String s) {
        assertTrue(BASE32.matcher(s).matches(), "\"" + s + "\" is not a base32 ID");
        return Wire.base32Id(s);
    }

    private static String orEmpty(String s) {
        return s == null ? "" : s;
    }

    // ---- the replies section, through the client ----

    @Order(2)
    @TestFactory
    Stream<DynamicTest> repliesThroughTheClient() {
        List<DynamicTest> tests = new ArrayList<>();
        int i = 0;
        for (JsonNode rc : file.get("replies").get("cases")) {
            String prefix = "replies" + i++;
            tests.add(DynamicTest.dynamicTest(rc.get("name").asText(), () -> replyCase(rc, prefix)));
        }
        return tests.stream();
    }

    /** A responder on prefix.next that answers the case's headers first, then (to a retry) the ID 42. */
    private Dispatcher responder(JsonNode headers, String subject, boolean always, AtomicInteger served) {
        Dispatcher d = nc.createDispatcher(m -> {
            Headers h = new Headers();
            headers.fields().forEachRemaining(e -> h.put(e.getKey(), e.getValue().asText()));
            if (served.incrementAndGet() == 1 || always) {
                nc.publish(m.getReplyTo(), h, new byte[0]);
            } else {
                nc.publish(m.getReplyTo(), "42".getBytes(StandardCharsets.US_ASCII));
            }
        });
        d.subscribe(subject);
        return d;
    }

    private void replyCase(JsonNode rc, String prefix) throws Exception {
        AtomicInteger served = new AtomicInteger();
        Dispatcher d = responder(rc.get("headers"), prefix + ".next", false, served);
        nc.flush(Duration.ofSeconds(5));
        try {
            UidClient c = UidClient.builder().connection(nc).subjectPrefix(prefix).timeout(Duration.ofSeconds(5)).build();
            JsonNode outcome = rc.get("outcome");
            if (outcome.get("retried").asBoolean()) {
                assertEquals(42, c.next());
                assertEquals(1, c.stats().retries());
                assertEquals(1, c.stats().unavailable());
                return;
            }
            Class<? extends ServiceException> want = switch (outcome.get("error").asText()) {
                case "bad_request" -> BadRequestException.class;
                case "unknown_sequence" -> UnknownSequenceException.class;
                case "internal" -> InternalException.class;
                default -> throw new AssertionError("unknown outcome " + outcome);
            };
            ServiceException e = assertThrows(want, c::next);
            assertEquals(rc.get("headers").get("Nats-Service-Error").asText(),
                    e.description().replaceFirst("^unparseable error code \"[^\"]*\": ", ""));
            assertEquals(1, served.get(), "not retried");
        } finally {
            nc.closeDispatcher(d);
        }
    }

    @Order(3)
    @Test
    void aCallThatGivesUpOn503sCarriesTheLastWithItsRetryHint() throws Exception {
        for (JsonNode rc : file.get("replies").get("cases")) {
            if (!rc.get("outcome").get("retried").asBoolean()) {
                continue;
            }
            Dispatcher d = responder(rc.get("headers"), "always503.next", true, new AtomicInteger());
            nc.flush(Duration.ofSeconds(5));
            try {
                UidClient c = UidClient.builder().connection(nc).subjectPrefix("always503").timeout(Duration.ofMillis(700)).build();
                GaveUpException e = assertThrows(GaveUpException.class, c::next);
                assertEquals(GaveUpException.Reason.DEADLINE, e.reason());
                assertTrue(e.attempts() > 1, e.getMessage());
                UnavailableException u = assertInstanceOf(UnavailableException.class, e.getCause());
                JsonNode hint = rc.get("outcome").get("retry_after_ms");
                if (hint != null) {
                    assertEquals(hint.asLong(), u.retryAfterMs().getAsLong());
                    // The hint is a floor: no more attempts than the deadline allows at that pace.
                    assertTrue(e.attempts() <= 1 + 700 / hint.asLong(), e.attempts() + " attempts");
                } else {
                    assertTrue(u.retryAfterMs().isEmpty());
                }
            } finally {
                nc.closeDispatcher(d);
            }
        }
    }

    @Order(4)
    @Test
    void aLive503IsRetriedUntilTheDeadline() {
        // The cases' dispenser sustains 16,384 IDs/s: 100,000 at once never fit.
        UidClient c = UidClient.builder().connection(nc).timeout(Duration.ofMillis(2500)).build();
        GaveUpException e = assertThrows(GaveUpException.class, () -> c.batch(100_000));
        assertEquals(GaveUpException.Reason.DEADLINE, e.reason());
        UnavailableException u = assertInstanceOf(UnavailableException.class, e.getCause());
        assertTrue(u.retryAfterMs().orElse(0) > 0, "retry after " + u.retryAfterMs());
        // The 503 was retried; how many more attempts fit the deadline is the
        // machine's affair (under load the retry can time out instead).
        assertTrue(c.stats().unavailable() >= 1 && c.stats().retries() >= 1, c.stats().toString());
        // And the instance still serves what it sustains.
        assertEquals(1000, c.withTimeout(Duration.ofSeconds(5)).batch(1000).length);
    }
}
