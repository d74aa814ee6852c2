package io.github.uiddispenser.testenv;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/**
 * A TCP link the test can cut: it listens on a free loopback port and
 * forwards each connection to a target port. {@link #cut()} closes every
 * connection through it and refuses new ones (accepted, then closed at
 * once) until {@link #heal()}: the peers see a real loss of the link, as
 * from a dead network.
 */
public final class LinkProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final List<Socket> open = new ArrayList<>(); // guarded by this
    private boolean cut; // guarded by this
    private volatile int target; // 0: not yet known, refuse

    public LinkProxy() throws IOException {
        listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::acceptLoop, "link-proxy-" + listener.getLocalPort());
        t.setDaemon(true);
        t.start();
    }

    /** The port it listens on. */
    public int port() {
        return listener.getLocalPort();
    }

    /** Where the connections go from now on: a loopback port. */
    public void target(int port) {
        target = port;
    }

    /** Closes every connection through the link, and refuses new ones until healed. */
    public synchronized void cut() {
        cut = true;
        open.forEach(LinkProxy::closeQuietly);
        open.clear();
    }

    /** Forwards new connections again. */
    public synchronized void heal() {
        cut = false;
    }

    @Override
    public void close() {
        cut();
        closeQuietly(listener);
    }

    private void acceptLoop() {
        while (!listener.isClosed()) {
            Socket in;
            try {
                in = listener.accept();
            } catch (IOException e) {
                return; // closed
            }
            Socket out = new Socket();
            try {
                int port = target;
                if (port == 0) {
                    throw new IOException("no target yet");
                }
                out.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5_000);
            } catch (IOException e) {
                closeQuietly(in);
                closeQuietly(out);
                continue;
            }
            synchronized (this) {
                if (cut) {
                    closeQuietly(in);
                    closeQuietly(out);
                    continue;
                }
                open.add(in);
                open.add(out);
            }
            pump(in, out);
            pump(out, in);
        }
    }

    /** Copies from to to until either ends, then closes both. */
    private void pump(Socket from, Socket to) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[16 * 1024];
            try (InputStream r = from.getInputStream(); OutputStream w = to.getOutputStream()) {
                for (int n; (n = r.read(buf)) >= 0;) {
                    w.write(buf, 0, n);
                    w.flush();
                }
            } catch (IOException e) {
                // the link was cut, or a peer closed: close both below
            } finally {
                synchronized (this) {
                    open.remove(from);
                    open.remove(to);
                }
                closeQuietly(from);
                closeQuietly(to);
            }
        }, "link-proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            // closing a socket that is already gone
        }
    }
}
