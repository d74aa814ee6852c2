package io.github.uiddispenser.uidgenerator;

import com.baidu.fsg.uid.UidGenerator;
import com.baidu.fsg.uid.exception.UidGenerateException;
import io.github.uiddispenser.client.Layout;
import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.client.UidException;
import java.time.ZoneId;
import java.util.Objects;

/**
 * Baidu UidGenerator's two calls served by uid-dispenser: a drop-in for a
 * {@code CachedUidGenerator} (or {@code DefaultUidGenerator}) bean, with
 * no change to its callers.
 *
 * <ul>
 *   <li>{@link #getUID()} takes an ID from a {@link Prefetcher}: in-process,
 *       lock-free, refilled in the background, as the cached generator's
 *       ring buffer was. A failure is a {@link UidGenerateException}, as
 *       UidGenerator threw, with the client's exception as its cause.</li>
 *   <li>{@link #parseUID(long)} decodes locally, with no request, as
 *       UidGenerator's parseUID does: the same JSON, keys and order, under the
 *       layout given (the fleet's, {@code DISPENSER_LAYOUT}, for the IDs this
 *       generator hands out; {@link Layout#UIDGENERATOR} for IDs the old
 *       generator issued, wrapped ones included), the timestamp in the zone
 *       given (UidGenerator printed the JVM's; the default here too).</li>
 * </ul>
 */
public final class DispenserUidGenerator implements UidGenerator, AutoCloseable {
    private final Prefetcher ids;
    private final boolean ownsPrefetcher;
    private final Layout layout;
    private final ZoneId zone;

    /** IDs from ids, parsed under layout with timestamps in zone. Closing leaves ids open. */
    public DispenserUidGenerator(Prefetcher ids, Layout layout, ZoneId zone) {
        this(ids, false, layout, zone);
    }

    /** IDs from ids, parsed under layout with timestamps in the JVM's zone, as UidGenerator printed them. */
    public DispenserUidGenerator(Prefetcher ids, Layout layout) {
        this(ids, false, layout, ZoneId.systemDefault());
    }

    private DispenserUidGenerator(Prefetcher ids, boolean owns, Layout layout, ZoneId zone) {
        this.ids = Objects.requireNonNull(ids);
        this.ownsPrefetcher = owns;
        this.layout = Objects.requireNonNull(layout);
        this.zone = Objects.requireNonNull(zone);
    }

    /** A generator with a prefetcher of its own on client (closed with it), parsing under layout. */
    public static DispenserUidGenerator of(UidClient client, Layout layout) {
        return new DispenserUidGenerator(Prefetcher.of(client), true, layout, ZoneId.systemDefault());
    }

    /**
     * A new unique ID (below 2^63: never negative).
     *
     * @throws UidGenerateException when no ID could be had within the client's timeout
     */
    @Override
    public long getUID() {
        try {
            return ids.next();
        } catch (UidException | IllegalStateException e) {
            throw new UidGenerateException("uid-dispenser: " + e.getMessage(), e);
        }
    }

    /** uid as UidGenerator's parseUID gives it, under this generator's layout and zone. */
    @Override
    public String parseUID(long uid) {
        return layout.parseUID(uid, zone);
    }

    /** The layout parseUID decodes with. */
    public Layout layout() {
        return layout;
    }

    /** Closes the prefetcher if this generator made it. */
    @Override
    public void close() {
        if (ownsPrefetcher) {
            ids.close();
        }
    }
}
