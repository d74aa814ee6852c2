package io.github.uiddispenser.bench;

import io.github.uiddispenser.client.Encoding;
import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import io.nats.client.Dispatcher;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import me.ahoo.cosid.segment.IdSegmentDistributor;
import me.ahoo.cosid.segment.SegmentChainId;
import me.ahoo.cosid.snowflake.MillisecondSnowflakeId;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The cost of one ID in the process, side by side in one run: a shared
 * {@code AtomicLong} (the limit), our {@link Prefetcher}, CosId's
 * {@code SegmentChainId} on its in-memory {@code IdSegmentDistributor.Atomic}
 * (the fastest distributor that needs no server; step 1,000, its default
 * safe distance) and CosId's {@code MillisecondSnowflakeId}.
 *
 * <p>The prefetcher refills over NATS, with the ranges encoding, from a
 * bare responder that hands out ranges from a counter: a source without
 * the dispenser's rate bound, like CosId's distributor, so that the figure
 * is the take path's (lock-free take, background refill, adaptive reserve).
 * {@code DispenserBenchmark} runs the same prefetcher against the real
 * dispenser, where the dispenser's issue rate is the bound.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class TakeBenchmark {
    private final AtomicLong counter = new AtomicLong();
    private TestEnv.NatsServer server;
    private Connection nc;
    private UidClient client;
    private Prefetcher prefetcher;
    private SegmentChainId segmentChain;
    private MillisecondSnowflakeId snowflake;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        server = TestEnv.startNatsServer();
        nc = server.connect();
        AtomicLong next = new AtomicLong(1);
        Dispatcher responder = nc.createDispatcher(m -> {
            long n = Long.parseLong(new String(m.getData(), StandardCharsets.US_ASCII).strip());
            byte[] run = ByteBuffer.allocate(16).putLong(next.getAndAdd(n)).putLong(n).array();
            nc.publish(m.getReplyTo(), run);
        });
        responder.subscribe("bench.batch");
        nc.flush(Duration.ofSeconds(5));
        client = UidClient.builder().connection(nc).subjectPrefix("bench").batchEncoding(Encoding.RANGES)
                .timeout(Duration.ofSeconds(30)).build();
        prefetcher = Prefetcher.builder(client).minBatch(1_000_000).maxBatch(50_000_000).maxReserve(400_000_000).build();
        TestEnv.waitFor("the first refill", Duration.ofSeconds(30), () -> prefetcher.available() > 0);
        segmentChain = new SegmentChainId(new IdSegmentDistributor.Atomic(1000));
        snowflake = new MillisecondSnowflakeId(1);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        prefetcher.close();
        nc.close();
        server.close();
    }

    @Benchmark
    public long atomicLong() {
        return counter.incrementAndGet();
    }

    @Benchmark
    public long prefetcher() {
        return prefetcher.next();
    }

    @Benchmark
    public long cosidSegmentChain() {
        return segmentChain.generate();
    }

    @Benchmark
    public long cosidSnowflake() {
        return snowflake.generate();
    }
}
