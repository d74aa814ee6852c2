package io.github.uiddispenser.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Keeps a reserve of IDs in the process and hands them out: the way to get
 * IDs at an atomic counter's cost. Safe for concurrent use.
 *
 * <p>The reserve is a chain of segments, each a run of consecutive IDs
 * (a ranges reply is its runs; a binary one is cut into its runs). A take
 * is one atomic increment of the current segment's cursor: lock-free.
 * Only the take that finds its segment used up moves to the next one,
 * under a lock; only a take that finds the reserve empty waits.
 *
 * <p>One background thread refills the reserve before it runs dry: it
 * measures the rate IDs are taken at and keeps {@link Builder#safeDistance}
 * worth of them in reserve (at least {@link Builder#minBatch}), asking for
 * batches of about that size (at most {@link Builder#maxBatch}), the way
 * CosId's segment chain keeps a safe distance. While the service keeps up,
 * no take waits for a refill.
 *
 * <p>IDs increase within a segment, not across segments (successive batches
 * may come from different instances). A prefetched ID carries the second in
 * which the dispenser issued it, which at low load may be a while before it
 * is handed out. {@link #close} drops the reserve: those IDs are never
 * issued again.
 */
public final class Prefetcher implements AutoCloseable {
    /** A run of consecutive IDs from first; the cursor counts the takes. */
    static final class Segment {
        private static final VarHandle CURSOR;

        static {
            try {
                CURSOR = MethodHandles.lookup().findVarHandle(Segment.class, "cursor", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        // Padding keeps the cursor, written by every take, off the cache line
        // of the fields every take reads.
        long p1, p2, p3, p4, p5, p6, p7;
        final long first;
        final long count;
        /** The take that wakes the refiller: half-way through. */
        final long trigger;
        long q1, q2, q3, q4, q5, q6, q7;
        private volatile long cursor;
        long r1, r2, r3, r4, r5, r6, r7;

        Segment(long first, long count) {
            this.first = first;
            this.count = count;
            this.trigger = count / 2;
        }

        long take() {
            return (long) CURSOR.getAndAdd(this, 1L);
        }

        long remaining() {
            return Math.max(0, count - cursor);
        }
    }

    private static final Segment EMPTY = new Segment(0, 0);

    private final UidClient client;
    private final Builder cfg;
    private final Thread refiller;
    /** The segment takes come from; replaced under lock. */
    private volatile Segment current = EMPTY;
    private final Object lock = new Object();
    /** Fetched segments waiting their turn (under lock). */
    private final ArrayDeque<Segment> ready = new ArrayDeque<>();
    private long queued; // IDs in ready (under lock)
    private volatile boolean closed;
    /** The last refill's error, null after a successful one; a BadRequestException is final. */
    private volatile UidException lastError;
    private volatile long fetchedTotal;
    private volatile double rate; // IDs per second, smoothed
    private volatile long target; // the reserve the refiller keeps

    private Prefetcher(UidClient client, Builder cfg) {
        this.client = client;
        this.cfg = cfg;
        this.target = cfg.minBatch;
        this.refiller = new Thread(this::refillLoop, "uid-prefetcher");
        this.refiller.setDaemon(true);
        this.refiller.start();
    }

    /** A builder for a prefetcher of client's IDs (in the client's batch encoding). */
    public static Builder builder(UidClient client) {
        return new Builder(client);
    }

    /** A prefetcher with the defaults; it starts filling its reserve at once. */
    public static Prefetcher of(UidClient client) {
        return builder(client).build();
    }

    /**
     * An ID from the reserve. When the reserve is empty it waits for a refill,
     * up to the client's timeout.
     *
     * @throws BadRequestException at once when refills are refused (a batch size above the service's largest)
     * @throws GaveUpException when the reserve stayed empty until the deadline; its cause is the last refill's error
     * @throws IllegalStateException after {@link #close}
     */
    public long next() {
        Segment s = current;
        long i = s.take();
        if (i < s.count) {
            if (i == s.trigger) {
                LockSupport.unpark(refiller);
            }
            return s.first + i;
        }
        return nextSlow(s);
    }

    private long nextSlow(Segment s) {
        long deadline = System.nanoTime() + client.timeout().toNanos();
        synchronized (lock) {
            for (;;) {
                if (closed) {
                    throw new IllegalStateException("prefetcher closed");
                }
                if (current == s) {
                    Segment n = ready.poll();
                    if (n != null) {
                        queued -= n.count;
                        current = n;
                        LockSupport.unpark(refiller);
                    }
                }
                s = current;
                long i = s.take();
                if (i < s.count) {
                    return s.first + i;
                }
                UidException err = lastError;
                if (err instanceof BadRequestException) {
                    throw err;
                }
                LockSupport.unpark(refiller);
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new GaveUpException("prefetcher", GaveUpException.Reason.DEADLINE, 0,
                            err != null ? err : new UidException("prefetcher empty: no refill arrived in time"));
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(lock, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new GaveUpException("prefetcher", GaveUpException.Reason.INTERRUPTED, 0, err);
                }
            }
        }
    }

    /** The IDs in the reserve now. */
    public long available() {
        synchronized (lock) {
            return closed ? 0 : current.remaining() + queued;
        }
    }

    /** The reserve the refiller keeps now: what the measured rate asks for, within the bounds. */
    public long reserveTarget() {
        return target;
    }

    /** The take rate the refiller measured, IDs per second (smoothed). */
    public double rate() {
        return rate;
    }

    /** Stops the refiller and drops the reserve (its IDs are never issued again). */
    @Override
    public void close() {
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            current = EMPTY;
            ready.clear();
            queued = 0;
            lock.notifyAll();
        }
        refiller.interrupt();
        try {
            refiller.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- the refiller ----

    private void refillLoop() {
        long backoff = TimeUnit.MILLISECONDS.toNanos(50);
        long lastTaken = 0;
        long lastTime = System.nanoTime();
        while (!closed) {
            long now = System.nanoTime();
            long avail = available();
            long taken = fetchedTotal - avail;
            if (now - lastTime >= cfg.measureEvery.toNanos()) {
                adapt((taken - lastTaken) * 1e9 / (now - lastTime));
                lastTaken = taken;
                lastTime = now;
            }
            if (avail < target) {
                long n = Math.min(cfg.maxBatch, Math.max(cfg.minBatch, target));
                try {
                    add(client.batchRuns((int) n));
                    lastError = null;
                    backoff = TimeUnit.MILLISECONDS.toNanos(50);
                    continue;
                } catch (UidException e) {
                    if (closed) {
                        return;
                    }
                    lastError = e;
                    synchronized (lock) {
                        lock.notifyAll(); // waiters see the error
                    }
                    // A 400 (a batch above the service's largest) is final for the
                    // takers, which see it at once; asked again rarely.
                    LockSupport.parkNanos(this, e instanceof BadRequestException ? TimeUnit.SECONDS.toNanos(2) : backoff);
                    backoff = Math.min(2 * backoff, TimeUnit.SECONDS.toNanos(2));
                    continue;
                }
            }
            // Woken by a take half-way through a segment, by a move to the next
            // segment, or to measure the rate again.
            LockSupport.parkNanos(this, cfg.measureEvery.toNanos());
        }
    }

    /** Sets the reserve target from a rate measured over the last interval. */
    private void adapt(double measured) {
        double r = rate == 0 ? measured : 0.5 * rate + 0.5 * measured;
        rate = r;
        double want = r * cfg.safeDistance.toNanos() / 1e9;
        target = (long) Math.max(cfg.minBatch, Math.min(want, (double) cfg.maxReserve));
    }

    private void add(long[] runs) {
        long n = Wire.countOf(runs);
        synchronized (lock) {
            if (closed) {
                return;
            }
            for (int k = 0; k < runs.length; k += 2) {
                ready.add(new Segment(runs[k], runs[k + 1]));
            }
            queued += n;
            fetchedTotal += n;
            lock.notifyAll();
        }
    }

    /**
     * A prefetcher's settings. Defaults: batches of 1,024 to 100,000 IDs, a
     * safe distance of 1 s of IDs at the measured rate, at most 400,000 IDs
     * in reserve, the rate measured every 20 ms.
     */
    public static final class Builder {
        private final UidClient client;
        private long minBatch = 1024;
        private long maxBatch = 100_000;
        private long maxReserve = 400_000;
        private Duration safeDistance = Duration.ofSeconds(1);
        private Duration measureEvery = Duration.ofMillis(20);

        private Builder(UidClient client) {
            this.client = Objects.requireNonNull(client);
        }

        /** The smallest batch asked for and the smallest reserve kept (1,024). */
        public Builder minBatch(long n) {
            this.minBatch = positive("minBatch", n);
            return this;
        }

        /** The largest batch asked for (100,000, the service's default largest batch). */
        public Builder maxBatch(long n) {
            this.maxBatch = positive("maxBatch", n);
            return this;
        }

        /** The largest reserve kept, whatever the rate (400,000). */
        public Builder maxReserve(long n) {
            this.maxReserve = positive("maxReserve", n);
            return this;
        }

        /** How many seconds of IDs, at the measured rate, the reserve holds (1 s). */
        public Builder safeDistance(Duration d) {
            this.safeDistance = Objects.requireNonNull(d);
            return this;
        }

        /** How often the refiller measures the rate and checks the reserve (20 ms). */
        public Builder measureEvery(Duration d) {
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("measureEvery must be positive");
            }
            this.measureEvery = d;
            return this;
        }

        /** The prefetcher; its refiller starts filling the reserve at once. */
        public Prefetcher build() {
            if (maxBatch < minBatch) {
                maxBatch = minBatch;
            }
            if (maxReserve < minBatch) {
                maxReserve = minBatch;
            }
            if (maxBatch > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("maxBatch " + maxBatch + " is above " + Integer.MAX_VALUE);
            }
            return new Prefetcher(client, this);
        }

        private static long positive(String what, long n) {
            if (n < 1) {
                throw new IllegalArgumentException(what + " must be at least 1, not " + n);
            }
            return n;
        }
    }
}
