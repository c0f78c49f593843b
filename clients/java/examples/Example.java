import dev.snowflaked.client.Layout;
import dev.snowflaked.client.SnowflakedClient;
import dev.snowflaked.client.SnowflakedNoNodeException;
import dev.snowflaked.client.SnowflakedRejectedException;
import dev.snowflaked.client.SnowflakedTimeoutException;
import java.time.Duration;
import java.util.Arrays;

/** The README's quick start: IDs from the cluster of `make run` (or the seed given as the argument). */
public class Example {
    public static void main(String[] args) {
        String seed = args.length > 0 ? args[0] : "127.0.0.1:8081";
        try (SnowflakedClient c = SnowflakedClient.builder().bootstrap(seed).build()) {
            System.out.println("nodes:   " + c.nodes());
            long id = c.nextId();
            System.out.println("id:      " + id + " " + Layout.DEFAULT.decode(id));
            System.out.println("ids:     " + Arrays.toString(c.nextIds(5, Duration.ofMillis(500))));
            System.out.println("demo:    " + Arrays.toString(c.nextSegment("demo", 3)));
            System.out.println("uuid:    " + c.nextUuid());
            try {
                c.nextGene(42);
            } catch (SnowflakedRejectedException e) { // make run's cluster has no gene bits
                System.out.println("gene:    rejected " + e.status() + " " + e.code());
            }
        } catch (SnowflakedTimeoutException e) {
            System.err.println("too slow: " + e.getMessage());
        } catch (SnowflakedNoNodeException e) {
            e.causes().forEach((node, cause) -> System.err.println(node + ": " + cause.getMessage()));
        }
    }
}
