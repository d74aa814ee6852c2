package io.github.uiddispenser.client;

import io.nats.client.Connection;
import io.nats.client.api.ServerInfo;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Moves a connection off a NATS server cut off from its cluster
 * (docs/protocol.md, "Moving off a cut-off server"; every client keeps the
 * same rule).
 *
 * <p>NATS never does so on its own: the connection to that server is
 * healthy, only the server has lost its routes, so every request sent there
 * gets no responders until the cut heals, however many servers the
 * connection knows. The client reports each attempt here: those that ended
 * in no responders are counted, in a row; any reply, an error status such as
 * a 503 too, resets the count; a timeout neither counts nor resets (it is
 * ambiguous: a paused or slow server times out requests too, and one cut off
 * answers no responders once its routes are gone). When the count reaches
 * {@code after}, the connection knows more than one server and reconnects at
 * all (one with {@code maxReconnects(0)} would be closed instead) and the
 * last move was at least {@code every} ago (monotonic clock; a reconnect the
 * mover did not make, such as another client's move on the same connection
 * or jnats's own reconnect, counts as a move and resets the count), the
 * connection is forced to reconnect ({@link Connection#forceReconnect()}, which takes
 * the next server of its pool) and the count starts again. The call goes on
 * retrying within its deadline meanwhile.
 *
 * <p>The connection stays its owner's: a mover only ever forces it to
 * reconnect, never closes it or changes its options. Thread-safe.
 */
final class Mover {
    private static final System.Logger LOG = System.getLogger(UidClient.class.getName());

    private final Connection nc;
    private final int after; // 0: never
    private final long everyNanos;
    private final AtomicInteger failures = new AtomicInteger(); // attempts in a row with no responders
    private final LongAdder moves = new LongAdder();
    private final Object lock = new Object(); // serialises the moves
    private boolean moved; // guarded by lock
    private long lastMove; // System.nanoTime() of the last move; guarded by lock
    /**
     * The connection's reconnect count the mover expects: as it last saw it,
     * plus one for each move of its own. Another count is a reconnect it did
     * not make (another client's move on the connection, jnats's own); see
     * {@link #reconnected}. Guarded by lock.
     */
    private long reconnects;

    Mover(Connection nc, int after, Duration every) {
        this.nc = nc;
        this.after = after;
        this.everyNanos = every.toNanos();
        this.reconnects = nc.getStatistics().getReconnects();
    }

    /** An attempt got a reply (an error status is a reply). */
    void replied() {
        // A read before the write: the replies of a busy client do not all write the same cache line.
        if (after != 0 && failures.get() != 0) {
            failures.set(0);
        }
    }

    /** An attempt ended in no responders. Tells whether it moved the connection. */
    boolean noResponders() {
        if (after == 0 || failures.incrementAndGet() < after) {
            return false;
        }
        int count;
        String left;
        synchronized (lock) {
            count = failures.get();
            long now = System.nanoTime();
            if (count < after // a reply, or another caller's move, came first
                    || reconnected(now)
                    || (moved && now - lastMove < everyNanos)
                    || nc.getStatus() != Connection.Status.CONNECTED // reconnecting already
                    || nc.getOptions().getMaxReconnect() == 0 // jnats would close it instead
                    || nc.getServers().size() < 2) {
                return false;
            }
            left = serverOnly(nc.getConnectedUrl()) + serverName(nc.getServerInfo());
            moved = true;
            lastMove = now;
            failures.set(0);
            reconnects++;
        }
        moves.increment();
        // jnats's forceReconnect returns once the new connection is up (or
        // the pool is exhausted): a thread of its own, so that the call goes
        // on retrying within its deadline.
        Thread t = new Thread(this::forceReconnect, "uid-dispenser-move");
        t.setDaemon(true);
        t.start();
        // No parameters: the message is not a MessageFormat pattern.
        LOG.log(System.Logger.Level.INFO, "uid-dispenser client: no dispenser answers through this NATS server;"
                + " moving to another server of the connection's pool event=client.moved server=" + left
                + " failed_attempts=" + count);
        return true;
    }

    /**
     * Whether the connection reconnected without a move of this mover's since
     * it last looked; if so, that reconnect is taken for a move: the count so
     * far was of attempts on the server the connection left, and {@code every}
     * runs from now. Two clients of two fleets sharing a connection each have
     * a mover: without this, the second moved the connection again a few
     * milliseconds after the first, off the server just reached, on the no
     * responders it had counted before the first move (the fault harness, Go).
     * Called with lock held.
     */
    private boolean reconnected(long now) {
        long seen = nc.getStatistics().getReconnects();
        if (seen == reconnects) {
            return false;
        }
        reconnects = seen;
        moved = true;
        lastMove = now;
        failures.set(0);
        return true;
    }

    /** How many times the connection was moved. */
    long moves() {
        return moves.sum();
    }

    private void forceReconnect() {
        try {
            nc.forceReconnect();
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "uid-dispenser client: the forced NATS reconnect failed ("
                    + e.getClass().getName() + ")"); // its message may name the URL, credentials and all
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A server URL without its user information: a password or a token may sit there. */
    static String serverOnly(String url) {
        if (url == null) {
            return "(no server)";
        }
        try {
            URI u = new URI(url);
            if (u.getHost() == null) {
                return "(unparseable URL)";
            }
            return (u.getScheme() == null ? "nats" : u.getScheme()) + "://" + u.getHost() + (u.getPort() < 0 ? "" : ":" + u.getPort());
        } catch (URISyntaxException e) {
            return "(unparseable URL)";
        }
    }

    private static String serverName(ServerInfo info) {
        return info == null || info.getServerName() == null ? "" : " server_name=" + info.getServerName();
    }
}
