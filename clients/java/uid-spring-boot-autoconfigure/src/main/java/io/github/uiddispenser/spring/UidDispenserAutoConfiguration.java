package io.github.uiddispenser.spring;

import com.baidu.fsg.uid.UidGenerator;
import io.github.uiddispenser.client.Layout;
import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;
import io.github.uiddispenser.uidgenerator.DispenserUidGenerator;
import io.nats.client.Connection;
import io.nats.client.Options;
import java.time.ZoneId;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * uid-dispenser for a Spring Boot application: a {@link UidClient}, a
 * {@link Prefetcher} and a {@link UidGenerator} (the drop-in for a
 * {@code CachedUidGenerator} bean), each only when the application defines
 * none of its own. The client sends on the application's
 * {@link Connection} bean when there is one (closing nothing of it), else
 * on a connection of its own made from {@code uid-dispenser.url} and the
 * credentials. {@code uid-dispenser.enabled=false} turns it all off.
 */
@AutoConfiguration
@ConditionalOnClass(UidClient.class)
@ConditionalOnProperty(prefix = "uid-dispenser", name = "enabled", matchIfMissing = true)
@EnableConfigurationProperties(UidDispenserProperties.class)
public class UidDispenserAutoConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public UidClient uidClient(UidDispenserProperties p, ObjectProvider<Connection> connection) {
        UidClient.Builder b = UidClient.builder()
                .subjectPrefix(p.getSubjectPrefix())
                .timeout(p.getTimeout())
                .attemptTimeout(p.getAttemptTimeout())
                .homeWait(p.getHomeWait())
                .moveAfter(p.getMoveAfter())
                .moveEvery(p.getMoveEvery())
                .batchEncoding(p.getBatchEncoding());
        Connection given = connection.getIfUnique();
        return given != null ? b.connection(given).build() : b.natsOptions(natsOptions(p)).build();
    }

    /** The connection's options from the properties; the credentials only when set. */
    static Options natsOptions(UidDispenserProperties p) {
        Options.Builder o = new Options.Builder()
                .server(p.getUrl())
                .connectionName(p.getConnectionName())
                .connectionTimeout(p.getConnectTimeout())
                .maxReconnects(-1);
        if (p.getUsername() != null && !p.getUsername().isEmpty()) {
            o.userInfo(p.getUsername(), p.getPassword() == null ? "" : p.getPassword());
        }
        if (p.getToken() != null && !p.getToken().isEmpty()) {
            o.token(p.getToken().toCharArray());
        }
        if (p.getCredentialsFile() != null && !p.getCredentialsFile().isEmpty()) {
            o.credentialPath(p.getCredentialsFile());
        }
        return o.build();
    }

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public Prefetcher uidPrefetcher(UidClient client, UidDispenserProperties p) {
        UidDispenserProperties.Prefetch f = p.getPrefetch();
        return Prefetcher.builder(client)
                .minBatch(f.getMinBatch())
                .maxBatch(f.getMaxBatch())
                .maxReserve(f.getMaxReserve())
                .safeDistance(f.getSafeDistance())
                .build();
    }

    /** The UidGenerator drop-in, when UidGenerator's interface is on the classpath and no bean of it is defined. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "com.baidu.fsg.uid.UidGenerator")
    static class UidGeneratorConfiguration {
        @Bean
        @ConditionalOnMissingBean(UidGenerator.class)
        DispenserUidGenerator uidGenerator(Prefetcher ids, UidDispenserProperties p) {
            UidDispenserProperties.UidGeneratorSettings g = p.getUidgenerator();
            ZoneId zone = g.getZone() == null || g.getZone().isEmpty() ? ZoneId.systemDefault() : ZoneId.of(g.getZone());
            return new DispenserUidGenerator(ids, Layout.parse(g.getLayout()), zone);
        }
    }
}
