package io.github.uiddispenser.client;

import io.nats.client.Connection;
import io.nats.client.JetStreamStatusException;
import io.nats.client.Message;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.impl.Headers;
import io.nats.client.support.NatsRequestCompletableFuture;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;

/**
 * Asks uid-dispenser instances for IDs over NATS. Safe for concurrent use.
 *
 * <p>IDs are {@code long}s: every ID and sequence number the dispenser
 * issues is below 2^63 (the sign bit is always clear), so none is negative.
 *
 * <p>Every call retries, until its deadline ({@link Builder#timeout}, 5 s by
 * default), when no dispenser is subscribed (all down or restarting), when
 * one answers 503 (no ID right now; never sooner than its
 * {@code Uid-Retry-After-Ms}) and when an attempt gets no reply within
 * {@link Builder#attemptTimeout} (an instance died holding the request),
 * with jittered exponential back-off. Retrying is safe: an ID in a lost
 * reply is never issued again. It then throws a {@link GaveUpException}
 * carrying the last failure. A 400 ({@link BadRequestException}), 404
 * ({@link UnknownSequenceException}) or 500 ({@link InternalException}) is
 * thrown at once.
 *
 * <p>A NATS server cut off from its cluster stays connected, and NATS never
 * moves a connection off it: every request there meets no responders.
 * After {@link Builder#moveAfter} such attempts in a row (2; any reply
 * resets the count, a timeout neither counts nor resets it), when the
 * connection knows another server and the last move was at least
 * {@link Builder#moveEvery} ago (5 s; a reconnect the client did not make,
 * such as another client's move of a shared connection, counts as a move
 * and resets the count), the client
 * forces the connection to reconnect ({@link Connection#forceReconnect()}:
 * the next server of its pool) and logs it at INFO
 * ({@code event=client.moved}, the server left without credentials). This
 * applies to a connection given to the builder as well.
 *
 * <pre>{@code
 * try (UidClient ids = UidClient.builder().url("nats://127.0.0.1:4222").build()) {
 *     long id = ids.next();
 *     long[] more = ids.batch(1000);
 * }
 * }</pre>
 */
public final class UidClient implements AutoCloseable {
    /** How many attempts in a row ending in no responders move the connection ({@link Builder#moveAfter}). */
    public static final int DEFAULT_MOVE_AFTER = 2;
    /** The least time between two moves of the connection ({@link Builder#moveEvery}). */
    public static final Duration DEFAULT_MOVE_EVERY = Duration.ofSeconds(5);

    private static final DateTimeFormatter TIMESTAMP = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss", Locale.ROOT);

    private final Connection nc;
    private final boolean ownsConnection;
    private final Builder cfg;
    private final Counters stats;
    private final Mover mover;
    private final Tracing tracing;
    private final String subjNext;
    private final String subjBatch;
    private final String subjParse;
    private final String seqNextTemplate;
    private final String seqBatchTemplate;

    private UidClient(Connection nc, boolean ownsConnection, Builder cfg, Counters stats, Mover mover, Tracing tracing) {
        this.nc = nc;
        this.ownsConnection = ownsConnection;
        this.cfg = cfg;
        this.stats = stats;
        this.mover = mover;
        this.tracing = tracing;
        String p = cfg.subjectPrefix;
        this.subjNext = Protocol.subject(p, "next");
        this.subjBatch = Protocol.subject(p, "batch");
        this.subjParse = Protocol.subject(p, "parse");
        this.seqNextTemplate = Protocol.seqSubject(p, "*", "next");
        this.seqBatchTemplate = Protocol.seqSubject(p, "*", "batch");
    }

    /** A builder: give it a {@link Connection} or a URL (or jnats {@link Options}). */
    public static Builder builder() {
        return new Builder();
    }

    /** A client on a new connection to url, with the defaults; closing the client closes it. */
    public static UidClient connect(String url) {
        return builder().url(url).build();
    }

    /** One new ID. */
    public long next() {
        return next(Encoding.DECIMAL);
    }

    /** One new ID, asked for in wire encoding (decimal or base32; binary and ranges are answered in decimal). */
    public long next(Encoding wire) {
        return single(subjNext, subjNext, wire, false);
    }

    /**
     * n new IDs, increasing, in one request, in the builder's batch encoding
     * (binary unless set). n must not exceed the service's largest batch
     * ({@code DISPENSER_MAX_BATCH}, 100,000 by default): a larger n is a
     * {@link BadRequestException}, never a shorter array.
     */
    public long[] batch(int n) {
        return batch(n, cfg.batchEncoding);
    }

    /** n new IDs, increasing, in one request in wire encoding. */
    public long[] batch(int n, Encoding wire) {
        return multi(subjBatch, subjBatch, n, wire, false);
    }

    /** The next number of the named sequence (declared with {@code DISPENSER_SEQUENCES}). */
    public long seqNext(String name) {
        return seqNext(name, Encoding.DECIMAL);
    }

    /** The next number of the named sequence, asked for in wire encoding. */
    public long seqNext(String name, Encoding wire) {
        return single(seqSubject(name, "next"), seqNextTemplate, wire, true);
    }

    /** The next n numbers of the named sequence, increasing, in one request. */
    public long[] seqBatch(String name, int n) {
        return seqBatch(name, n, cfg.batchEncoding);
    }

    /** The next n numbers of the named sequence, increasing, in one request in wire encoding. */
    public long[] seqBatch(String name, int n, Encoding wire) {
        return multi(seqSubject(name, "batch"), seqBatchTemplate, n, wire, true);
    }

    /** id split into its fields by a dispenser, under the fleet's layout. */
    public Parts parse(long id) {
        Message reply = call(subjParse, subjParse, new Headers(), Long.toString(id).getBytes(StandardCharsets.US_ASCII), false);
        Map<String, String> j = Json.stringObject(text(reply));
        try {
            return new Parts(Long.parseLong(j.getOrDefault("UID", "")),
                    LocalDateTime.parse(j.getOrDefault("timestamp", ""), TIMESTAMP).toInstant(ZoneOffset.UTC),
                    Long.parseLong(j.getOrDefault("workerId", "")), Long.parseLong(j.getOrDefault("sequence", "")));
        } catch (NumberFormatException | DateTimeParseException e) {
            throw new UidException(subjParse + ": reply " + Wire.shorten(text(reply), 120) + " is not parseUID's JSON", e);
        }
    }

    /**
     * id decoded by a dispenser as UidGenerator's parseUID would under layout:
     * a preset ({@code uidgenerator}, {@code jssafe}, {@code default}) or
     * {@code T/W/S@epoch}, sent as the {@code Uid-Layout} header. A negative
     * id (a wrapped UidGenerator ID, as a signed column holds it) decodes too,
     * with {@link ParsedUid#wrapped()} saying so. To decode without a server,
     * see {@link Layout#parseUID}.
     */
    public ParsedUid parse(long id, String layout) {
        Headers h = new Headers().put(Protocol.LAYOUT_HEADER, layout);
        Message reply = call(subjParse, subjParse, h, Long.toString(id).getBytes(StandardCharsets.US_ASCII), false);
        String json = text(reply);
        Map<String, String> j = Json.stringObject(json);
        if (!j.containsKey("UID")) {
            throw new UidException(subjParse + ": reply " + Wire.shorten(json, 120) + " is not parseUID's JSON");
        }
        return new ParsedUid(j.get("UID"), j.getOrDefault("timestamp", ""), j.getOrDefault("workerId", ""),
                j.getOrDefault("sequence", ""), Optional.ofNullable(j.get("wrapped")), json);
    }

    /** {@link Base32#encode}. */
    public static String toBase32(long id) {
        return Base32.encode(id);
    }

    /** {@link Base32#decode}. */
    public static long fromBase32(String s) {
        return Base32.decode(s);
    }

    /**
     * This client with another deadline per call: it shares the connection,
     * the counters, the move off a cut-off server and the settings. Closing
     * it closes nothing.
     */
    public UidClient withTimeout(Duration timeout) {
        Builder b = cfg.copy().timeout(timeout);
        return new UidClient(nc, false, b, stats, mover, tracing);
    }

    /** The deadline of each call. */
    public Duration timeout() {
        return cfg.timeout;
    }

    /** The batch encoding {@link #batch(int)} and the prefetcher ask for. */
    public Encoding batchEncoding() {
        return cfg.batchEncoding;
    }

    /** The connection the client sends on. */
    public Connection connection() {
        return nc;
    }

    /** The counters since the client was made (shared with its {@link #withTimeout} copies). */
    public ClientStats stats() {
        return new ClientStats(stats.requests.sum(), stats.retries.sum(), stats.unavailable.sum(),
                stats.noResponders.sum(), stats.timedOut.sum(), mover.moves());
    }

    /** Closes the connection if the client made it; one it was given stays open. */
    @Override
    public void close() {
        if (!ownsConnection) {
            return;
        }
        try {
            nc.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The runs (pairs first, count) of a batch of n in the builder's encoding: what the prefetcher keeps. */
    long[] batchRuns(int n) {
        Encoding wire = cfg.batchEncoding;
        byte[] data = batchReply(subjBatch, subjBatch, n, wire, false).getData();
        long[] runs = wire == Encoding.RANGES ? Wire.decodeRuns(data) : Wire.runsOf(decodeIds(data, wire));
        checkCount(subjBatch, n, Wire.countOf(runs));
        return runs;
    }

    private long single(String subject, String template, Encoding wire, boolean sequence) {
        Headers h = encodingHeaders(wire);
        Message reply = call(subject, template, h, new byte[0], sequence);
        String body = text(reply);
        try {
            return wire == Encoding.BASE32 ? Wire.base32Id(body) : Wire.decimalId(body);
        } catch (UidException e) {
            throw new UidException(subject + ": " + e.getMessage());
        }
    }

    private long[] multi(String subject, String template, int n, Encoding wire, boolean sequence) {
        byte[] data = batchReply(subject, template, n, wire, sequence).getData();
        if (wire == Encoding.RANGES) {
            // The count is checked before the runs are expanded: 16 bytes
            // can claim a billion IDs, which no batch of n asked for.
            long[] runs;
            try {
                runs = Wire.decodeRuns(data);
            } catch (UidException e) {
                throw new UidException(subject + ": " + e.getMessage());
            }
            checkCount(subject, n, Wire.countOf(runs));
            return Wire.expand(runs);
        }
        long[] ids;
        try {
            ids = decodeIds(data, wire);
        } catch (UidException e) {
            throw new UidException(subject + ": " + e.getMessage());
        }
        checkCount(subject, n, ids.length);
        return ids;
    }

    private Message batchReply(String subject, String template, int n, Encoding wire, boolean sequence) {
        if (n < 1) {
            throw new BadRequestException(subject, "count " + n + ": ask for at least 1 ID");
        }
        return call(subject, template, encodingHeaders(wire), Integer.toString(n).getBytes(StandardCharsets.US_ASCII), sequence);
    }

    private static long[] decodeIds(byte[] data, Encoding wire) {
        switch (wire) {
            case BINARY:
                return Wire.decodeBinary(data);
            case BASE32:
                return Wire.decodeLines(data, true);
            case RANGES:
                return Wire.expand(Wire.decodeRuns(data));
            default:
                return Wire.decodeLines(data, false);
        }
    }

    private static void checkCount(String subject, long want, long got) {
        if (want != got) {
            throw new UidException(subject + ": asked for " + want + " IDs, the reply holds " + got);
        }
    }

    private static Headers encodingHeaders(Encoding wire) {
        Headers h = new Headers();
        if (wire.headerValue() != null) {
            h.put(Protocol.ENCODING_HEADER, wire.headerValue());
        }
        return h;
    }

    private String seqSubject(String name, String op) {
        String subject = Protocol.seqSubject(cfg.subjectPrefix, name, op);
        boolean ok = name != null && !name.isEmpty();
        for (int i = 0; ok && i < name.length(); i++) {
            char c = name.charAt(i);
            ok = c > ' ' && c != '.' && c != '*' && c != '>' && c < 127;
        }
        if (!ok) {
            throw new BadRequestException(subject, "sequence name \"" + name + "\" is not one NATS subject token");
        }
        return subject;
    }

    // ---- requests and retries ----

    /** Sends a request until a dispenser answers it, the error is final, or the deadline passes; one span covers all attempts. */
    private Message call(String subject, String template, Headers h, byte[] body, boolean sequence) {
        long deadline = System.nanoTime() + cfg.timeout.toNanos();
        Tracing.Call span = tracing.start(template, subject, h);
        try {
            Message reply = attempts(subject, h, body, deadline, sequence);
            span.end(null);
            return reply;
        } catch (RuntimeException e) {
            span.end(e);
            throw e;
        }
    }

    private Message attempts(String subject, Headers h, byte[] body, long deadline, boolean sequence) {
        stats.requests.increment();
        long backoff = cfg.minBackoff.toNanos();
        UidException last = null;
        boolean homeAsked = !sequence; // only sequences have homes
        HomeUnreachableException home = null; // set once the instances named it
        long homeSince = 0;
        boolean homeTiming = false;
        for (int attempt = 1;; attempt++) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw giveUp(subject, GaveUpException.Reason.DEADLINE, attempt - 1, last, home);
            }
            if (attempt > 1) {
                stats.retries.increment();
            }
            UidException err;
            boolean cut = left < cfg.attemptTimeout.toNanos(); // this attempt is bounded by the deadline
            try {
                Message reply = once(subject, h, body, Math.min(cfg.attemptTimeout.toNanos(), left));
                ServiceException se = ServiceException.fromHeaders(subject, header(reply, Protocol.ERROR_CODE_HEADER),
                        header(reply, Protocol.ERROR_HEADER), header(reply, Protocol.RETRY_AFTER_HEADER));
                mover.replied();
                if (se == null) {
                    return reply;
                }
                err = se;
            } catch (NoRespondersException e) {
                mover.noResponders();
                err = e;
            } catch (AttemptTimeoutException e) {
                err = e; // neither counts toward a move nor resets the count (Mover)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new GaveUpException(subject, GaveUpException.Reason.INTERRUPTED, attempt, last);
            }
            if (cut && err instanceof AttemptTimeoutException && last != null) {
                // The deadline, not the instance, ended this attempt: the
                // failure before it says more (a 503 that waited, say).
                stats.count(err);
                throw giveUp(subject, GaveUpException.Reason.DEADLINE, attempt, last, home);
            }
            boolean noResponders = err instanceof NoRespondersException;
            if (!homeAsked && noResponders) {
                homeAsked = true;
                UidException answer = homeUnreachable(subject, deadline);
                if (answer instanceof HomeUnreachableException) {
                    home = (HomeUnreachableException) answer;
                } else if (answer != null) {
                    stats.count(err);
                    throw answer;
                }
            }
            // The home is unreachable for as long as no responders lasts without a break.
            if (home != null) {
                long now = System.nanoTime();
                if (!noResponders) {
                    homeTiming = false;
                } else if (!homeTiming) {
                    homeTiming = true;
                    homeSince = now;
                } else if (now - homeSince >= cfg.homeWait.toNanos()) {
                    stats.count(err);
                    throw home;
                }
            }
            if (!noResponders && !(err instanceof UnavailableException) && !(err instanceof AttemptTimeoutException)) {
                throw err;
            }
            last = err;
            stats.count(err);
            long pause = backoff / 2 + ThreadLocalRandom.current().nextLong(backoff / 2 + 1);
            if (err instanceof UnavailableException) {
                long hint = ((UnavailableException) err).retryAfterMs().orElse(0);
                pause = Math.max(pause, TimeUnit.MILLISECONDS.toNanos(hint));
            }
            backoff = Math.min(2 * backoff, cfg.maxBackoff.toNanos());
            try {
                TimeUnit.NANOSECONDS.sleep(Math.max(0, Math.min(pause, deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new GaveUpException(subject, GaveUpException.Reason.INTERRUPTED, attempt, last);
            }
        }
    }

    private static UidException giveUp(String subject, GaveUpException.Reason reason, int attempts, UidException last,
            HomeUnreachableException home) {
        if (home != null && last instanceof NoRespondersException) {
            return home;
        }
        return new GaveUpException(subject, reason, attempts, last);
    }

    /** One request, bounded by timeoutNanos. */
    private Message once(String subject, Headers h, byte[] body, long timeoutNanos) throws InterruptedException {
        CompletableFuture<Message> f;
        try {
            f = nc.requestWithTimeout(subject, h.isEmpty() ? null : h, body, Duration.ofNanos(timeoutNanos));
        } catch (IllegalStateException e) { // the connection is closed
            throw new UidException(subject + ": " + e.getMessage(), e);
        }
        Message reply;
        try {
            reply = f.get(timeoutNanos, TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new AttemptTimeoutException(subject, TimeUnit.NANOSECONDS.toMillis(timeoutNanos));
        } catch (CancellationException e) {
            throw cancelled(subject, f, timeoutNanos, e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof JetStreamStatusException && ((JetStreamStatusException) c).getStatus().getCode() == 503) {
                throw new NoRespondersException(subject);
            }
            if (c instanceof TimeoutException) {
                throw new AttemptTimeoutException(subject, TimeUnit.NANOSECONDS.toMillis(timeoutNanos));
            }
            if (c instanceof CancellationException) {
                throw cancelled(subject, f, timeoutNanos, (CancellationException) c);
            }
            throw new UidException(subject + ": " + c, c);
        }
        if (reply.isStatusMessage()) { // a connection whose options complete the future with the status
            if (reply.getStatus().getCode() == 503) {
                throw new NoRespondersException(subject);
            }
            throw new UidException(subject + ": status " + reply.getStatus().getCode() + " " + reply.getStatus().getMessage());
        }
        return reply;
    }

    /** What a cancelled request future means: the connection closing, the request timed out, or no responders. */
    private static UidException cancelled(String subject, CompletableFuture<Message> f, long timeoutNanos, CancellationException e) {
        if (f instanceof NatsRequestCompletableFuture) {
            NatsRequestCompletableFuture nf = (NatsRequestCompletableFuture) f;
            if (nf.wasCancelledClosing()) {
                return new UidException(subject + ": the connection is closing", e);
            }
            if (nf.wasCancelledTimedOut()) {
                return new AttemptTimeoutException(subject, TimeUnit.NANOSECONDS.toMillis(timeoutNanos));
            }
        }
        return new NoRespondersException(subject);
    }

    /**
     * When a sequence request met no responders: asks the sequence's home
     * (answered in a fleet of regions only). A home named means it cannot be
     * reached (a HomeUnreachableException, thrown once that lasts the home
     * wait); a 404 means the name is homed nowhere; null when nobody answers
     * (retry as any other request).
     */
    private UidException homeUnreachable(String subject, long deadline) {
        String prefix = cfg.subjectPrefix + ".seq.";
        String name = subject.substring(prefix.length(), subject.lastIndexOf('.'));
        long timeout = Math.min(cfg.attemptTimeout.toNanos(), deadline - System.nanoTime());
        if (timeout <= 0) {
            return null;
        }
        Message reply;
        try {
            reply = nc.requestWithTimeout(Protocol.seqSubject(cfg.subjectPrefix, name, "home"), null, new byte[0],
                    Duration.ofNanos(timeout)).get(timeout, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (ExecutionException | TimeoutException | IllegalStateException e) {
            return null;
        }
        if (reply.isStatusMessage()) {
            return null;
        }
        ServiceException se = ServiceException.fromHeaders(subject, header(reply, Protocol.ERROR_CODE_HEADER),
                header(reply, Protocol.ERROR_HEADER), null);
        if (se != null) {
            return se instanceof UnknownSequenceException ? se : null;
        }
        String home = text(reply).strip();
        return home.isEmpty() ? null : new HomeUnreachableException(subject, name, Wire.shorten(home, 64));
    }

    /** The first value of a reply's header, its name matched in any case; null when absent. */
    static String header(Message m, String name) {
        if (!m.hasHeaders()) {
            return null;
        }
        Headers h = m.getHeaders();
        String v = h.getFirst(name);
        if (v != null) {
            return v;
        }
        List<String> any = h.getIgnoreCase(name);
        return any == null || any.isEmpty() ? null : any.get(0);
    }

    private static String text(Message m) {
        byte[] d = m.getData();
        return d == null ? "" : new String(d, StandardCharsets.UTF_8);
    }

    /** The client's counters, shared by its withTimeout copies. */
    private static final class Counters {
        final LongAdder requests = new LongAdder();
        final LongAdder retries = new LongAdder();
        final LongAdder unavailable = new LongAdder();
        final LongAdder noResponders = new LongAdder();
        final LongAdder timedOut = new LongAdder();

        void count(UidException err) {
            if (err instanceof UnavailableException) {
                unavailable.increment();
            } else if (err instanceof NoRespondersException) {
                noResponders.increment();
            } else if (err instanceof AttemptTimeoutException) {
                timedOut.increment();
            }
        }
    }

    /**
     * The client's settings. Defaults: subject prefix {@code uid}, 5 s per
     * call, 1 s per attempt, back-off doubling from 2 to 250 ms with jitter,
     * 2 s of home wait, binary batches, a move after 2 attempts without a
     * reply, at most one every 5 s.
     */
    public static final class Builder {
        private Connection connection;
        private String url;
        private Options natsOptions;
        private String subjectPrefix = Protocol.DEFAULT_SUBJECT_PREFIX;
        private Duration timeout = Duration.ofSeconds(5);
        private Duration attemptTimeout = Duration.ofSeconds(1);
        private Duration minBackoff = Duration.ofMillis(2);
        private Duration maxBackoff = Duration.ofMillis(250);
        private Duration homeWait = Duration.ofSeconds(2);
        private Encoding batchEncoding = Encoding.BINARY;
        private int moveAfter = DEFAULT_MOVE_AFTER;
        private Duration moveEvery = DEFAULT_MOVE_EVERY;

        private Builder() {
        }

        private Builder copy() {
            Builder b = new Builder();
            b.subjectPrefix = subjectPrefix;
            b.timeout = timeout;
            b.attemptTimeout = attemptTimeout;
            b.minBackoff = minBackoff;
            b.maxBackoff = maxBackoff;
            b.homeWait = homeWait;
            b.batchEncoding = batchEncoding;
            b.moveAfter = moveAfter;
            b.moveEvery = moveEvery;
            return b;
        }

        /** Send on this connection (the application's; closing the client leaves it open). */
        public Builder connection(Connection connection) {
            this.connection = connection;
            return this;
        }

        /** Connect to this server (reconnecting for ever); closing the client closes the connection. */
        public Builder url(String url) {
            this.url = url;
            return this;
        }

        /** Connect with these jnats options (credentials, TLS...); closing the client closes the connection. */
        public Builder natsOptions(Options options) {
            this.natsOptions = options;
            return this;
        }

        /** The dispenser's subject prefix ({@code DISPENSER_SUBJECT_PREFIX}), {@code uid} by default. */
        public Builder subjectPrefix(String prefix) {
            this.subjectPrefix = Objects.requireNonNull(prefix);
            return this;
        }

        /** The deadline of each call, all its attempts together (5 s). */
        public Builder timeout(Duration timeout) {
            this.timeout = positive("timeout", timeout);
            return this;
        }

        /** The bound of one attempt (1 s): an instance that died holding a request never answers it. */
        public Builder attemptTimeout(Duration attemptTimeout) {
            this.attemptTimeout = positive("attemptTimeout", attemptTimeout);
            return this;
        }

        /** The pause between attempts: doubled from min to max, with jitter (2 ms, 250 ms). */
        public Builder backoff(Duration min, Duration max) {
            this.minBackoff = positive("min backoff", min);
            this.maxBackoff = max.compareTo(min) < 0 ? min : max;
            return this;
        }

        /** How long a sequence call keeps asking while its home region cannot be reached (2 s). */
        public Builder homeWait(Duration homeWait) {
            this.homeWait = positive("homeWait", homeWait);
            return this;
        }

        /**
         * How many attempts in a row ending in no responders force the
         * connection onto another server of its pool (2): its server may be
         * cut off from the cluster. A timeout neither counts nor resets the
         * count. 0 never moves it.
         */
        public Builder moveAfter(int attempts) {
            if (attempts < 0) {
                throw new IllegalArgumentException("moveAfter must be 0 (never) or more, not " + attempts);
            }
            this.moveAfter = attempts;
            return this;
        }

        /**
         * The least time between two moves of the connection (5 s): a fleet with no instance at all fails on every server.
         * A reconnect the client did not make (another client's move of a shared connection) counts as a move.
         */
        public Builder moveEvery(Duration every) {
            this.moveEvery = positive("moveEvery", every);
            return this;
        }

        /** The wire encoding of batches and of the prefetcher's refills: BINARY (default) or RANGES. */
        public Builder batchEncoding(Encoding encoding) {
            this.batchEncoding = Objects.requireNonNull(encoding);
            return this;
        }

        /**
         * The client. Without a connection it connects (to the URL or with
         * the options) and owns the connection.
         *
         * @throws UidException when the connection cannot be made
         */
        public UidClient build() {
            if (connection != null) {
                return new UidClient(connection, false, copy(), new Counters(), new Mover(connection, moveAfter, moveEvery),
                        Tracing.detect());
            }
            Options o = natsOptions;
            if (o == null) {
                if (url == null) {
                    throw new IllegalStateException("UidClient.Builder: give a connection, a URL or NATS options");
                }
                o = new Options.Builder().server(url).maxReconnects(-1).build();
            }
            try {
                Connection nc = Nats.connect(o);
                return new UidClient(nc, true, copy(), new Counters(), new Mover(nc, moveAfter, moveEvery), Tracing.detect());
            } catch (IOException e) {
                // The URL may hold credentials: not in the message.
                throw new UidException("connect to NATS: " + e.getMessage(), e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new UidException("connect to NATS: interrupted", e);
            }
        }

        private static Duration positive(String what, Duration d) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException(what + " must be positive, not " + d);
            }
            return d;
        }
    }
}
