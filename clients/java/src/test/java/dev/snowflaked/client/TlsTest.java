package dev.snowflaked.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Mutual TLS against a fake HTTPS node, with EC P-256 PKCS#8 keys made by openssl (skipped without it). */
@Timeout(60)
class TlsTest {
    private static Path dir;
    private static FakeNode node;

    private static void run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + ": " + new String(out));
        }
    }

    private static void ca(String name) throws Exception {
        run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name + "-key.pem");
        run("openssl", "req", "-x509", "-new", "-key", name + "-key.pem", "-subj", "/CN=" + name, "-days", "2", "-out", name + ".pem");
    }

    private static void leaf(String name, String ca, String ext) throws Exception {
        run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name + "-key.pem");
        run("openssl", "req", "-new", "-key", name + "-key.pem", "-subj", "/CN=" + name, "-out", name + ".csr");
        Files.writeString(dir.resolve(name + ".ext"), ext);
        run("openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + "-key.pem", "-CAcreateserial",
                "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem");
    }

    @BeforeAll
    static void pki() throws Exception {
        boolean haveOpenssl;
        try {
            haveOpenssl = new ProcessBuilder("openssl", "version").start().waitFor() == 0;
        } catch (IOException e) {
            haveOpenssl = false;
        }
        Assumptions.assumeTrue(haveOpenssl, "openssl is needed to make the test PKI");
        dir = Files.createTempDirectory("snowflaked-tls");
        ca("ca");
        ca("other");
        leaf("server", "ca", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
        leaf("client", "ca", "extendedKeyUsage=clientAuth\n");
        node = new FakeNode(Pem.context(dir.resolve("ca.pem"), dir.resolve("server.pem"), dir.resolve("server-key.pem")));
    }

    @AfterAll
    static void cleanup() throws IOException {
        if (node != null) {
            node.close();
        }
        if (dir != null) {
            try (Stream<Path> s = Files.walk(dir)) {
                for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
    }

    @Test
    void mutualTls() {
        try (SnowflakedClient c = SnowflakedClient.builder().nodes(node.addr)
                .tls(dir.resolve("ca.pem"), dir.resolve("client.pem"), dir.resolve("client-key.pem")).build()) {
            long[] ids = c.nextIds(3);
            assertEquals(3, ids.length);
            assertTrue(ids[0] < ids[1] && ids[1] < ids[2]);
        }
    }

    @Test
    void noClientCertificateIsNoNode() {
        try (SnowflakedClient c = SnowflakedClient.builder().nodes(node.addr).tls(dir.resolve("ca.pem")).build()) {
            SnowflakedNoNodeException e = assertThrows(SnowflakedNoNodeException.class, c::nextId);
            assertEquals(List.of(node.addr), List.copyOf(e.causes().keySet()));
        }
    }

    @Test
    void anotherCaIsNoNode() {
        try (SnowflakedClient c = SnowflakedClient.builder().nodes(node.addr)
                .tls(dir.resolve("other.pem"), dir.resolve("client.pem"), dir.resolve("client-key.pem")).build()) {
            assertThrows(SnowflakedNoNodeException.class, c::nextId);
        }
    }

    @Test
    void aKeyThatIsNotPkcs8IsAConfigError() throws Exception {
        run("openssl", "ec", "-in", "client-key.pem", "-out", "client-sec1.pem");
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.builder().nodes(node.addr)
                .tls(dir.resolve("ca.pem"), dir.resolve("client.pem"), dir.resolve("client-sec1.pem")).build());
    }
}
