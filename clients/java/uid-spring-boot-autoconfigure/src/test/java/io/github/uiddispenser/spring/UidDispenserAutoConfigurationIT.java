package io.github.uiddispenser.spring;

import static org.assertj.core.api.Assertions.assertThat;

import com.baidu.fsg.uid.UidGenerator;
import io.github.uiddispenser.client.Layout;
import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.testenv.TestEnv;
import io.nats.client.Connection;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** Spring contexts booted against a live dispenser, as an application boots with the auto-configuration. */
class UidDispenserAutoConfigurationIT {
    private static final String PREFIX = "springuid";
    private static TestEnv.NatsServer server;
    private static TestEnv.Dispenser dispenser;

    @BeforeAll
    static void start() throws Exception {
        server = TestEnv.startNatsServer();
        dispenser = TestEnv.startDispenser(server.url(), Map.of("DISPENSER_SUBJECT_PREFIX", PREFIX, "DISPENSER_SEQUENCES", "orders"));
    }

    @AfterAll
    static void stop() {
        if (dispenser != null) {
            dispenser.close();
        }
        if (server != null) {
            server.close();
        }
    }

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(UidDispenserAutoConfiguration.class));

    @Test
    void theClientThePrefetcherAndTheUidGeneratorAreBeans() {
        AtomicReference<Connection> own = new AtomicReference<>();
        runner.withPropertyValues("uid-dispenser.url=" + server.url(), "uid-dispenser.subject-prefix=" + PREFIX,
                "uid-dispenser.timeout=10s", "uid-dispenser.prefetch.min-batch=500",
                "uid-dispenser.uidgenerator.zone=UTC").run(ctx -> {
                    assertThat(ctx).hasSingleBean(UidClient.class).hasSingleBean(Prefetcher.class).hasSingleBean(UidGenerator.class);
                    UidClient client = ctx.getBean(UidClient.class);
                    assertThat(client.timeout()).isEqualTo(Duration.ofSeconds(10));
                    own.set(client.connection());
                    long id = client.next();
                    assertThat(client.seqNext("orders")).isGreaterThanOrEqualTo(0);
                    UidGenerator gen = ctx.getBean(UidGenerator.class);
                    Set<Long> seen = new HashSet<>();
                    for (int i = 0; i < 5000; i++) {
                        assertThat(seen.add(gen.getUID())).isTrue();
                    }
                    assertThat(seen).doesNotContain(id);
                    // parseUID as the dispenser reads the IDs it issued (the fleet's layout, UTC here).
                    long one = seen.iterator().next();
                    assertThat(gen.parseUID(one)).isEqualTo(client.parse(one, "default").json());
                    assertThat(ctx.getBean(Prefetcher.class).next()).isPositive();
                });
        // The context's end closes the connection it made.
        assertThat(own.get().getStatus()).isEqualTo(Connection.Status.CLOSED);
    }

    @Test
    void theMoveSettingsReachTheClient() {
        // The builder refuses a negative move-after: the context fails only if the property reached it.
        runner.withPropertyValues("uid-dispenser.url=" + server.url(), "uid-dispenser.move-after=-1").run(ctx ->
                assertThat(ctx).hasFailed().getFailure().rootCause().hasMessageContaining("moveAfter must be 0 (never) or more"));
        runner.withPropertyValues("uid-dispenser.url=" + server.url(), "uid-dispenser.move-every=0s").run(ctx ->
                assertThat(ctx).hasFailed().getFailure().rootCause().hasMessageContaining("moveEvery must be positive"));
        runner.withPropertyValues("uid-dispenser.url=" + server.url(), "uid-dispenser.subject-prefix=" + PREFIX,
                "uid-dispenser.move-after=0", "uid-dispenser.move-every=1m").run(ctx ->
                assertThat(ctx.getBean(UidClient.class).next()).isPositive());
    }

    @Test
    void theApplicationsConnectionAndUidGeneratorWin() throws Exception {
        try (Connection nc = server.connect()) {
            UidGenerator mine = new UidGenerator() {
                @Override
                public long getUID() {
                    return 7;
                }

                @Override
                public String parseUID(long uid) {
                    return "mine";
                }
            };
            // Spring would close an AutoCloseable bean itself: this one is the test's.
            runner.withBean("appConnection", Connection.class, () -> nc, bd -> bd.setDestroyMethodName(""))
                    .withBean(UidGenerator.class, () -> mine)
                    .withPropertyValues("uid-dispenser.subject-prefix=" + PREFIX, "uid-dispenser.url=nats://127.0.0.1:1")
                    .run(ctx -> {
                        assertThat(ctx.getBean(UidClient.class).connection()).isSameAs(nc);
                        assertThat(ctx.getBean(UidClient.class).next()).isPositive();
                        assertThat(ctx.getBean(UidGenerator.class)).isSameAs(mine);
                    });
            assertThat(nc.getStatus()).isEqualTo(Connection.Status.CONNECTED);
        }
    }

    @Test
    void oldIdsParseWithUidGeneratorsLayout() {
        runner.withPropertyValues("uid-dispenser.url=" + server.url(), "uid-dispenser.subject-prefix=" + PREFIX,
                "uid-dispenser.uidgenerator.layout=uidgenerator", "uid-dispenser.uidgenerator.zone=Asia/Shanghai").run(ctx -> {
                    UidGenerator gen = ctx.getBean(UidGenerator.class);
                    assertThat(gen.parseUID(9223372002495045632L))
                            .isEqualTo("{\"UID\":\"9223372002495045632\",\"timestamp\":\"2024-11-20 21:24:15\",\"workerId\":\"1\",\"sequence\":\"0\"}");
                    assertThat(((io.github.uiddispenser.uidgenerator.DispenserUidGenerator) gen).layout()).isEqualTo(Layout.UIDGENERATOR);
                });
    }

    @Test
    void offWhenDisabled() {
        runner.withPropertyValues("uid-dispenser.enabled=false").run(ctx -> assertThat(ctx).doesNotHaveBean(UidClient.class));
    }
}
