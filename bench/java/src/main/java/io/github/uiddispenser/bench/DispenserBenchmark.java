package io.github.uiddispenser.bench;

import io.github.uiddispenser.client.Encoding;
import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
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
 * The prefetcher against the real dispenser binary (default layout, one
 * instance, ranges): sustained takes are bounded by what the instance
 * issues at wall-clock pace (4,194,304 IDs a second per lane), not by the
 * take path.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class DispenserBenchmark {
    private TestEnv.NatsServer server;
    private TestEnv.Dispenser dispenser;
    private Connection nc;
    private Prefetcher prefetcher;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        server = TestEnv.startNatsServer();
        dispenser = TestEnv.startDispenser(server.url());
        nc = server.connect();
        UidClient client = UidClient.builder().connection(nc).batchEncoding(Encoding.RANGES).timeout(Duration.ofSeconds(30)).build();
        prefetcher = Prefetcher.builder(client).build();
        TestEnv.waitFor("the first refill", Duration.ofSeconds(30), () -> prefetcher.available() > 0);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        prefetcher.close();
        nc.close();
        dispenser.close();
        server.close();
    }

    @Benchmark
    public long prefetcherFromDispenser() {
        return prefetcher.next();
    }
}
