import io.github.uiddispenser.client.Prefetcher;
import io.github.uiddispenser.client.UidClient;

/** The README's quickstart: IDs from a dispenser at NATS_URL (default nats://127.0.0.1:4222). */
public class Quickstart {
    public static void main(String[] args) {
        String url = System.getenv().getOrDefault("NATS_URL", "nats://127.0.0.1:4222");
        try (UidClient ids = UidClient.connect(url); Prefetcher reserve = Prefetcher.of(ids)) {
            System.out.println(ids.next());           // one ID, a long below 2^63
            long[] batch = ids.batch(1000);           // 1,000 in one request, binary on the wire
            System.out.println("batch of " + batch.length + ": " + batch[0] + " .. " + batch[batch.length - 1]);
            System.out.println(reserve.next());       // from the in-process reserve: no request on the hot path
            System.out.println(ids.parse(batch[0]));  // Parts[id=…, time=…, workerId=…, sequence=…]
        } // closes the prefetcher, then the connection: the program ends
    }
}
