package io.github.uiddispenser.client;

import java.time.Instant;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Locale;

/**
 * An ID layout: {@code sign | delta seconds | worker ID | sequence}, the
 * widths of the three fields and the epoch the seconds count from, as the
 * dispenser's {@code DISPENSER_LAYOUT} and the {@code Uid-Layout} header
 * write it: a preset ({@code default}, {@code jssafe}, {@code uidgenerator})
 * or {@code T/W/S@epoch}. It decodes IDs locally, without a server, exactly
 * as Baidu's UidGenerator's {@code parseUID} does, wrapped (negative) IDs of
 * its cached generator included.
 */
public final class Layout {
    /** The dispenser's default: 31/10/22 from 2026-01-01T00:00:00Z. */
    public static final Layout DEFAULT = new Layout(31, 10, 22, Instant.parse("2026-01-01T00:00:00Z"), "default");
    /** 31/6/16 from 2026-01-01T00:00:00Z: every ID at most 2^53 - 1. */
    public static final Layout JSSAFE = new Layout(31, 6, 16, Instant.parse("2026-01-01T00:00:00Z"), "jssafe");
    /**
     * UidGenerator's defaults: 28/22/13 from 2016-05-20 00:00 in UTC+8
     * (unix 1463673600, as its code hard-codes it).
     */
    public static final Layout UIDGENERATOR = new Layout(28, 22, 13, Instant.ofEpochSecond(1463673600L), "uidgenerator");

    private static final DateTimeFormatter TIMESTAMP = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss", Locale.ROOT);

    private final int timeBits;
    private final int workerBits;
    private final int sequenceBits;
    private final Instant epoch;
    private final String name;

    private Layout(int timeBits, int workerBits, int sequenceBits, Instant epoch, String name) {
        this.timeBits = timeBits;
        this.workerBits = workerBits;
        this.sequenceBits = sequenceBits;
        this.epoch = epoch;
        this.name = name;
    }

    /**
     * A layout of the given widths and epoch. The dispenser's bounds hold:
     * 20 to 61 bits of time, 1 to 42 each of worker and sequence, at most 63
     * in all, an epoch from 1970.
     *
     * @throws IllegalArgumentException naming what is out of bounds
     */
    public static Layout of(int timeBits, int workerBits, int sequenceBits, Instant epoch) {
        check("time", timeBits, 20, 61);
        check("worker", workerBits, 1, 42);
        check("sequence", sequenceBits, 1, 42);
        int sum = timeBits + workerBits + sequenceBits;
        if (sum > 63) {
            throw new IllegalArgumentException("layout " + timeBits + "/" + workerBits + "/" + sequenceBits + " has " + sum
                    + " bits, at most 63 fit beside the sign bit");
        }
        if (epoch.getEpochSecond() < 0) {
            throw new IllegalArgumentException("epoch " + epoch + " is before 1970-01-01T00:00:00Z");
        }
        return new Layout(timeBits, workerBits, sequenceBits, epoch, null);
    }

    /**
     * Reads a preset ({@code default}, {@code jssafe}, {@code uidgenerator}, any
     * case) or {@code T/W/S@epoch}, the epoch an RFC 3339 time
     * ({@code 2016-05-20T00:00:00+08:00}) or a date, read as midnight UTC
     * ({@code 2026-01-01}). A {@code T/W/S} without an epoch is refused:
     * counting from the wrong epoch would misread every timestamp.
     *
     * @throws IllegalArgumentException naming what is wrong with spec
     */
    public static Layout parse(String spec) {
        String s = spec.strip();
        switch (s.toLowerCase(Locale.ROOT)) {
            case "default":
                return DEFAULT;
            case "jssafe":
                return JSSAFE;
            case "uidgenerator":
                return UIDGENERATOR;
            default:
                break;
        }
        int at = s.indexOf('@');
        String[] fields = (at < 0 ? s : s.substring(0, at)).split("/", -1);
        if (fields.length != 3) {
            throw new IllegalArgumentException("layout \"" + spec
                    + "\": want a preset (default, jssafe, uidgenerator) or time/worker/sequence bits@epoch such as 28/22/13@2016-05-20T00:00:00+08:00");
        }
        if (at < 0) {
            throw new IllegalArgumentException("layout \"" + spec
                    + "\" has no epoch: write T/W/S@epoch (28/22/13@2016-05-20T00:00:00+08:00), or the preset uidgenerator for UidGenerator's defaults");
        }
        int[] bits = new int[3];
        for (int i = 0; i < 3; i++) {
            try {
                bits[i] = Integer.parseInt(fields[i].strip());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("layout \"" + spec + "\": \"" + fields[i] + "\" is not a number of bits");
            }
        }
        return of(bits[0], bits[1], bits[2], parseEpoch(spec, s.substring(at + 1).strip()));
    }

    private static Instant parseEpoch(String spec, String text) {
        try {
            if (text.length() == 10) {
                return LocalDate.parse(text).atStartOfDay(ZoneOffset.UTC).toInstant();
            }
            return OffsetDateTime.parse(text).toInstant();
        } catch (DateTimeParseException e) {
            throw new IllegalArgumentException("layout \"" + spec + "\": the epoch \"" + text
                    + "\" is neither an RFC 3339 time such as 2016-05-20T00:00:00+08:00 nor a date such as 2026-01-01");
        }
    }

    private static void check(String field, int bits, int lo, int hi) {
        if (bits < lo || bits > hi) {
            throw new IllegalArgumentException(field + " bits " + bits + " is outside " + lo + ".." + hi);
        }
    }

    public int timeBits() {
        return timeBits;
    }

    public int workerBits() {
        return workerBits;
    }

    public int sequenceBits() {
        return sequenceBits;
    }

    /** The instant delta seconds count from. */
    public Instant epoch() {
        return epoch;
    }

    /** The sequence field of id. */
    public long sequence(long id) {
        return id & mask(sequenceBits);
    }

    /** The worker-ID field of id. */
    public long workerId(long id) {
        return (id >>> sequenceBits) & mask(workerBits);
    }

    /**
     * The seconds since the epoch: everything above the worker field, read
     * unsigned as UidGenerator does, so a wrapped ID (its time field run into
     * the sign bit) reads as the second it was issued in.
     */
    public long deltaSeconds(long id) {
        return id >>> (workerBits + sequenceBits);
    }

    /** The second id was issued in. */
    public Instant time(long id) {
        return epoch.plusSeconds(deltaSeconds(id));
    }

    /**
     * UidGenerator's packing, {@code delta << (W+S) | worker << S | seq}, with
     * no masking (an overflowing field runs into the next, and the time field
     * into the sign bit, as UidGenerator's BitsAllocator does).
     */
    public long pack(long deltaSeconds, long workerId, long sequence) {
        return deltaSeconds << (workerBits + sequenceBits) | workerId << sequenceBits | sequence;
    }

    /**
     * id as UidGenerator's {@code parseUID} gives it:
     * {@code {"UID":"…","timestamp":"yyyy-MM-dd HH:mm:ss","workerId":"…","sequence":"…"}},
     * every value a string, the UID signed as the long it is, the timestamp
     * in zone (UidGenerator used the JVM's zone; the dispenser uses UTC).
     */
    public String parseUID(long id, ZoneId zone) {
        return "{\"UID\":\"" + id + "\",\"timestamp\":\"" + TIMESTAMP.format(time(id).atZone(zone))
                + "\",\"workerId\":\"" + workerId(id) + "\",\"sequence\":\"" + sequence(id) + "\"}";
    }

    /** {@code T/W/S@epoch}, or the preset's name. */
    @Override
    public String toString() {
        return name != null ? name : timeBits + "/" + workerBits + "/" + sequenceBits + "@" + epoch;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Layout && ((Layout) o).timeBits == timeBits && ((Layout) o).workerBits == workerBits
                && ((Layout) o).sequenceBits == sequenceBits && ((Layout) o).epoch.equals(epoch);
    }

    @Override
    public int hashCode() {
        return ((timeBits * 64 + workerBits) * 64 + sequenceBits) * 31 + epoch.hashCode();
    }

    private static long mask(int bits) {
        return (1L << bits) - 1;
    }
}
