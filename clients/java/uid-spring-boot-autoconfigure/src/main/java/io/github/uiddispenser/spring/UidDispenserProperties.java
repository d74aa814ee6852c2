package io.github.uiddispenser.spring;

import io.github.uiddispenser.client.Encoding;
import io.github.uiddispenser.client.UidClient;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The settings under {@code uid-dispenser.}: where NATS is and how to log
 * in, the dispenser's subject prefix, the client's timeouts, the
 * prefetcher's bounds, and how the UidGenerator drop-in parses IDs.
 * Unset values take the client's defaults.
 */
@ConfigurationProperties(prefix = "uid-dispenser")
public class UidDispenserProperties {
    /** The NATS server(s), comma-separated. Used when the application defines no io.nats.client.Connection bean. */
    private String url = "nats://127.0.0.1:4222";
    /** User name and password, when the server asks for them. */
    private String username;
    private String password;
    /** A token, when the server asks for one. */
    private String token;
    /** A .creds file (JWT and NKey seed), when the server uses them. */
    private String credentialsFile;
    /** The connection's name, as the server's monitoring shows it. */
    private String connectionName = "uid-dispenser-client";
    /** How long the first connection may take. */
    private Duration connectTimeout = Duration.ofSeconds(2);
    /** The dispenser's subject prefix (DISPENSER_SUBJECT_PREFIX). */
    private String subjectPrefix = "uid";
    /** The deadline of each call, all its attempts together. */
    private Duration timeout = Duration.ofSeconds(5);
    /** The bound of one attempt. */
    private Duration attemptTimeout = Duration.ofSeconds(1);
    /** How long a sequence call keeps asking while its home region cannot be reached. */
    private Duration homeWait = Duration.ofSeconds(2);
    /** Attempts in a row ending in no responders (a timeout neither counts nor resets) that move the connection to another server (its server may be cut off from the cluster); 0: never. */
    private int moveAfter = UidClient.DEFAULT_MOVE_AFTER;
    /** The least time between two moves of the connection. */
    private Duration moveEvery = UidClient.DEFAULT_MOVE_EVERY;
    /** The wire encoding of batches and refills: BINARY, or RANGES with a dispenser that has it. */
    private Encoding batchEncoding = Encoding.BINARY;
    private final Prefetch prefetch = new Prefetch();
    private final UidGeneratorSettings uidgenerator = new UidGeneratorSettings();

    /** The prefetcher's bounds. */
    public static class Prefetch {
        /** The smallest batch and reserve. */
        private long minBatch = 1024;
        /** The largest batch (the service's DISPENSER_MAX_BATCH at most). */
        private long maxBatch = 100_000;
        /** The largest reserve, whatever the rate. */
        private long maxReserve = 400_000;
        /** How many seconds of IDs, at the measured rate, the reserve holds. */
        private Duration safeDistance = Duration.ofSeconds(1);

        public long getMinBatch() {
            return minBatch;
        }

        public void setMinBatch(long minBatch) {
            this.minBatch = minBatch;
        }

        public long getMaxBatch() {
            return maxBatch;
        }

        public void setMaxBatch(long maxBatch) {
            this.maxBatch = maxBatch;
        }

        public long getMaxReserve() {
            return maxReserve;
        }

        public void setMaxReserve(long maxReserve) {
            this.maxReserve = maxReserve;
        }

        public Duration getSafeDistance() {
            return safeDistance;
        }

        public void setSafeDistance(Duration safeDistance) {
            this.safeDistance = safeDistance;
        }
    }

    /** How the UidGenerator bean's parseUID reads IDs. */
    public static class UidGeneratorSettings {
        /** The layout parseUID decodes with: the fleet's DISPENSER_LAYOUT (a preset, or T/W/S@epoch). */
        private String layout = "default";
        /** The zone of parseUID's timestamps; unset: the JVM's, as UidGenerator printed them. */
        private String zone;

        public String getLayout() {
            return layout;
        }

        public void setLayout(String layout) {
            this.layout = layout;
        }

        public String getZone() {
            return zone;
        }

        public void setZone(String zone) {
            this.zone = zone;
        }
    }

    public String getUrl() {
        return url;
    }

    public void setUrl(String url) {
        this.url = url;
    }

    public String getUsername() {
        return username;
    }

    public void setUsername(String username) {
        this.username = username;
    }

    public String getPassword() {
        return password;
    }

    public void setPassword(String password) {
        this.password = password;
    }

    public String getToken() {
        return token;
    }

    public void setToken(String token) {
        this.token = token;
    }

    public String getCredentialsFile() {
        return credentialsFile;
    }

    public void setCredentialsFile(String credentialsFile) {
        this.credentialsFile = credentialsFile;
    }

    public String getConnectionName() {
        return connectionName;
    }

    public void setConnectionName(String connectionName) {
        this.connectionName = connectionName;
    }

    public Duration getConnectTimeout() {
        return connectTimeout;
    }

    public void setConnectTimeout(Duration connectTimeout) {
        this.connectTimeout = connectTimeout;
    }

    public String getSubjectPrefix() {
        return subjectPrefix;
    }

    public void setSubjectPrefix(String subjectPrefix) {
        this.subjectPrefix = subjectPrefix;
    }

    public Duration getTimeout() {
        return timeout;
    }

    public void setTimeout(Duration timeout) {
        this.timeout = timeout;
    }

    public Duration getAttemptTimeout() {
        return attemptTimeout;
    }

    public void setAttemptTimeout(Duration attemptTimeout) {
        this.attemptTimeout = attemptTimeout;
    }

    public Duration getHomeWait() {
        return homeWait;
    }

    public void setHomeWait(Duration homeWait) {
        this.homeWait = homeWait;
    }

    public int getMoveAfter() {
        return moveAfter;
    }

    public void setMoveAfter(int moveAfter) {
        this.moveAfter = moveAfter;
    }

    public Duration getMoveEvery() {
        return moveEvery;
    }

    public void setMoveEvery(Duration moveEvery) {
        this.moveEvery = moveEvery;
    }

    public Encoding getBatchEncoding() {
        return batchEncoding;
    }

    public void setBatchEncoding(Encoding batchEncoding) {
        this.batchEncoding = batchEncoding;
    }

    public Prefetch getPrefetch() {
        return prefetch;
    }

    public UidGeneratorSettings getUidgenerator() {
        return uidgenerator;
    }
}
