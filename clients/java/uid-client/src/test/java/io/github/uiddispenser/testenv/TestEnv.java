package io.github.uiddispenser.testenv;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.nats.client.Connection;
import io.nats.client.Message;
import io.nats.client.Nats;
import io.nats.client.Options;

/**
 * The real servers the tests talk to: the machine's nats-server binary and
 * the dispenser binary built from this repository, each a process of its
 * own on ports it picks itself. Processes still running when the JVM exits
 * are killed.
 */
public final class TestEnv {
    private TestEnv() {
    }

    private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly)));
    }

    /**
     * Waits until cond holds, checking every 10 ms, or fails after within
     * saying what it waited for: the one way the tests wait, on state, never
     * a fixed sleep. The bound is generous; it only keeps a broken run from
     * hanging.
     */
    public static void waitFor(String what, Duration within, BooleanSupplier cond) {
        long end = System.nanoTime() + within.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("waited " + within + " for " + what);
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for " + what);
            }
        }
    }

    /** The repository root: the nearest directory above the working directory with go.mod and cmd/dispenser. */
    public static Path repoRoot() {
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.exists(p.resolve("go.mod")) && Files.isDirectory(p.resolve("cmd/dispenser"))) {
                return p;
            }
        }
        throw new IllegalStateException("no repository root (go.mod with cmd/dispenser) above " + Paths.get("").toAbsolutePath());
    }

    /** A running nats-server process. */
    public static final class NatsServer implements AutoCloseable {
        private final Process proc;
        private final Path dir;
        private final String url;
        private final int clusterPort;

        private NatsServer(Process proc, Path dir, String url, int clusterPort) {
            this.proc = proc;
            this.dir = dir;
            this.url = url;
            this.clusterPort = clusterPort;
        }

        public String url() {
            return url;
        }

        /** The port it listens on for routes; 0 without a cluster. */
        public int clusterPort() {
            return clusterPort;
        }

        /** A new connection that reconnects for ever; closed by the caller. */
        public Connection connect() throws IOException, InterruptedException {
            return Nats.connect(new Options.Builder().server(url).maxReconnects(-1).reconnectWait(Duration.ofMillis(50)).build());
        }

        @Override
        public void close() {
            stop(proc, false);
            deleteTree(dir);
        }
    }

    /**
     * Starts nats-server with JetStream on a free loopback port (the server
     * picks it and writes it to a ports file, so no other test can take it in
     * between) and a temporary store. The binary is UID_TEST_NATS_SERVER, or
     * nats-server on PATH, or ~/go/bin/nats-server, or /usr/sbin/nats-server.
     */
    public static NatsServer startNatsServer() throws IOException {
        Path dir = Files.createTempDirectory("uid-java-nats-");
        return startNatsServer(dir, "-js", "-a", "127.0.0.1", "-p", "-1", "-sd", dir.resolve("store").toString());
    }

    /** nats-server with args, its ports file and log in dir (deleted at close). */
    private static NatsServer startNatsServer(Path dir, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(natsServerBinary()));
        cmd.addAll(List.of(args));
        cmd.addAll(List.of("--ports_file_dir", dir.toString()));
        Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(dir.resolve("log").toFile()).start();
        RUNNING.add(proc);
        String[] url = new String[1];
        int[] clusterPort = new int[1];
        Pattern first = Pattern.compile("\"nats\"\\s*:\\s*\\[\\s*\"([^\"]+)\"");
        Pattern cluster = Pattern.compile("\"cluster\"\\s*:\\s*\\[\\s*\"[^\"]*:(\\d+)\"");
        waitFor("nats-server to write its ports file", Duration.ofSeconds(30), () -> {
            if (!proc.isAlive()) {
                throw new AssertionError("nats-server exited at start: " + read(dir.resolve("log")));
            }
            try (var files = Files.list(dir)) {
                Path ports = files.filter(f -> f.toString().endsWith(".ports")).findFirst().orElse(null);
                if (ports == null) {
                    return false;
                }
                String text = read(ports);
                Matcher m = first.matcher(text);
                if (!m.find()) {
                    return false; // being written
                }
                url[0] = m.group(1);
                Matcher c = cluster.matcher(text);
                clusterPort[0] = c.find() ? Integer.parseInt(c.group(1)) : 0;
                return true;
            } catch (IOException e) {
                return false;
            }
        });
        return new NatsServer(proc, dir, url[0], clusterPort[0]);
    }

    /**
     * Two nats-server nodes, A and B (server tags {@code a} and {@code b}),
     * in one cluster with JetStream, whose routes go through a
     * {@link LinkProxy} each way (each node also advertises its proxy as
     * its route address, so that no route bypasses them): {@link #cut()}
     * cuts A and B off from each other while both keep serving their
     * clients.
     */
    public static final class Cluster implements AutoCloseable {
        private final LinkProxy toA;
        private final LinkProxy toB;
        private final NatsServer a;
        private final NatsServer b;

        private Cluster(LinkProxy toA, LinkProxy toB, NatsServer a, NatsServer b) {
            this.toA = toA;
            this.toB = toB;
            this.a = a;
            this.b = b;
        }

        public NatsServer a() {
            return a;
        }

        public NatsServer b() {
            return b;
        }

        /** Closes every route connection between A and B and refuses new ones until {@link #heal()}. */
        public void cut() {
            toA.cut();
            toB.cut();
        }

        /** Lets the routes connect again (the servers retry every second or so). */
        public void heal() {
            toA.heal();
            toB.heal();
        }

        @Override
        public void close() {
            a.close();
            b.close();
            toA.close();
            toB.close();
        }
    }

    /** Starts a {@link Cluster} of two nodes with JetStream, each on free loopback ports. */
    public static Cluster startCluster() throws IOException {
        LinkProxy toA = new LinkProxy();
        LinkProxy toB = new LinkProxy();
        NatsServer a = null;
        try {
            a = startClusterNode("A", toA, toB);
            NatsServer b = startClusterNode("B", toB, toA);
            toA.target(a.clusterPort());
            toB.target(b.clusterPort());
            return new Cluster(toA, toB, a, b);
        } catch (IOException | RuntimeException | Error e) {
            if (a != null) {
                a.close();
            }
            toA.close();
            toB.close();
            throw e;
        }
    }

    private static NatsServer startClusterNode(String name, LinkProxy self, LinkProxy peer) throws IOException {
        Path dir = Files.createTempDirectory("uid-java-nats-" + name + "-");
        Path conf = dir.resolve("server.conf");
        Files.writeString(conf, String.join("\n",
                "server_name: " + name,
                "server_tags: [\"" + name.toLowerCase(java.util.Locale.ROOT) + "\"]",
                "listen: \"127.0.0.1:-1\"",
                "jetstream { store_dir: \"" + dir.resolve("store") + "\" }",
                "cluster {",
                "  name: uid-test",
                "  listen: \"127.0.0.1:-1\"",
                "  advertise: \"127.0.0.1:" + self.port() + "\"",
                "  routes: [\"nats-route://127.0.0.1:" + peer.port() + "\"]",
                "}", ""), StandardCharsets.UTF_8);
        return startNatsServer(dir, "-c", conf.toString());
    }

    private static String natsServerBinary() {
        String given = System.getenv("UID_TEST_NATS_SERVER");
        if (given != null && !given.isEmpty()) {
            return given;
        }
        List<String> candidates = new ArrayList<>();
        for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            if (!d.isEmpty()) {
                candidates.add(d + "/nats-server");
            }
        }
        candidates.add(System.getProperty("user.home") + "/go/bin/nats-server");
        candidates.add("/usr/sbin/nats-server");
        for (String c : candidates) {
            if (Files.isExecutable(Paths.get(c))) {
                return c;
            }
        }
        throw new IllegalStateException("no nats-server binary (PATH, ~/go/bin, /usr/sbin): install it or set UID_TEST_NATS_SERVER");
    }

    private static Path dispenserBin;

    /**
     * The dispenser binary: UID_DISPENSER_BIN, or one built from the
     * repository with {@code go build -o <tmp> ./cmd/dispenser}, once per JVM.
     */
    public static synchronized Path dispenserBinary() throws IOException, InterruptedException {
        String given = System.getenv("UID_DISPENSER_BIN");
        if (given != null && !given.isEmpty()) {
            return Paths.get(given);
        }
        if (dispenserBin == null) {
            Path out = Files.createTempDirectory("uid-java-bin-").resolve("dispenser");
            String go = Files.isExecutable(Paths.get("/usr/local/go/bin/go")) && onPath("go") == null ? "/usr/local/go/bin/go" : "go";
            Process p = new ProcessBuilder(go, "build", "-o", out.toString(), "./cmd/dispenser")
                    .directory(repoRoot().toFile()).inheritIO().start();
            if (p.waitFor() != 0) {
                throw new IllegalStateException("go build ./cmd/dispenser failed with " + p.exitValue());
            }
            dispenserBin = out;
        }
        return dispenserBin;
    }

    private static String onPath(String name) {
        for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            if (!d.isEmpty() && Files.isExecutable(Paths.get(d, name))) {
                return d + "/" + name;
            }
        }
        return null;
    }

    /** A running dispenser process. */
    public static final class Dispenser implements AutoCloseable {
        private final Process proc;
        private final Path log;

        private Dispenser(Process proc, Path log) {
            this.proc = proc;
            this.log = log;
        }

        /** kill -9, and waits for it to exit. */
        public void kill() {
            stop(proc, true);
        }

        /** What it logged. */
        public String log() {
            return read(log);
        }

        /** SIGTERM, and waits for it to exit. */
        @Override
        public void close() {
            stop(proc, false);
        }
    }

    /**
     * Starts the dispenser on the NATS server at url with env (DISPENSER_*
     * variables) and waits until it answers {@code <prefix>.next}.
     */
    @SuppressWarnings("try")
    public static Dispenser startDispenser(String url, Map<String, String> env) throws IOException, InterruptedException {
        Path log = Files.createTempFile("uid-java-dispenser-", ".log");
        ProcessBuilder pb = new ProcessBuilder(dispenserBinary().toString()).redirectErrorStream(true).redirectOutput(log.toFile());
        Map<String, String> e = pb.environment();
        e.keySet().removeIf(k -> k.startsWith("DISPENSER_") || k.startsWith("OTEL_"));
        e.put("DISPENSER_NATS_URL", url);
        e.put("DISPENSER_LOG_LEVEL", "warn");
        // Each test's store is fresh; with a loss window a new instance's
        // sequences answer 503 for their settle period (6 s), longer than a
        // call's default deadline.
        e.put("DISPENSER_STORE_LOSS_WINDOW", "0");
        e.putAll(env);
        Process proc = pb.start();
        RUNNING.add(proc);
        Dispenser d = new Dispenser(proc, log);
        String subject = env.getOrDefault("DISPENSER_SUBJECT_PREFIX", "uid") + ".next";
        try (Connection nc = Nats.connect(new Options.Builder().server(url).build())) {
            waitFor("the dispenser to answer " + subject, Duration.ofSeconds(60), () -> {
                if (!proc.isAlive()) {
                    throw new AssertionError("dispenser exited with " + proc.exitValue() + ": " + d.log());
                }
                try {
                    Message m = nc.request(subject, new byte[0], Duration.ofMillis(500));
                    return m != null && (!m.hasHeaders() || m.getHeaders().getFirst("Nats-Service-Error-Code") == null)
                            && !m.isStatusMessage();
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    return false;
                } catch (RuntimeException ex) {
                    return false; // no responders yet
                }
            });
        }
        return d;
    }

    /** startDispenser with no variables beyond the URL. */
    public static Dispenser startDispenser(String url) throws IOException, InterruptedException {
        return startDispenser(url, Collections.emptyMap());
    }

    private static void stop(Process p, boolean kill) {
        RUNNING.remove(p);
        if (kill) {
            p.destroyForcibly();
        } else {
            p.destroy();
        }
        try {
            p.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static String read(Path p) {
        try {
            String s = Files.readString(p, StandardCharsets.UTF_8);
            return s.length() > 20_000 ? s.substring(s.length() - 20_000) : s;
        } catch (IOException e) {
            return "";
        }
    }

    private static void deleteTree(Path dir) {
        try (var walk = Files.walk(dir)) {
            walk.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            // a temporary directory: left to the system
        }
    }
}
