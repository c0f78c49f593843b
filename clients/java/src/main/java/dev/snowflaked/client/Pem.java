package dev.snowflaked.client;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/** Builds an {@link SSLContext} from PEM files: a CA, and optionally a client certificate and its PKCS#8 key. */
final class Pem {
    private Pem() {
    }

    static SSLContext context(Path ca, Path cert, Path key) throws IOException, GeneralSecurityException {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        KeyStore trust = KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        int n = 0;
        for (Certificate c : cf.generateCertificates(new ByteArrayInputStream(Files.readAllBytes(ca)))) {
            trust.setCertificateEntry("ca" + n++, c);
        }
        if (n == 0) {
            throw new GeneralSecurityException(ca + ": no certificate");
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        KeyManagerFactory kmf = null;
        if (cert != null) {
            List<Certificate> chain = new ArrayList<>(cf.generateCertificates(new ByteArrayInputStream(Files.readAllBytes(cert))));
            if (chain.isEmpty()) {
                throw new GeneralSecurityException(cert + ": no certificate");
            }
            PrivateKey pk = privateKey(Files.readString(key == null ? cert : key, StandardCharsets.US_ASCII));
            KeyStore ks = KeyStore.getInstance("PKCS12");
            ks.load(null, null);
            char[] pw = "snowflaked".toCharArray();
            ks.setKeyEntry("client", pk, pw, chain.toArray(new Certificate[0]));
            kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(ks, pw);
        }
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return ctx;
    }

    static PrivateKey privateKey(String pem) throws GeneralSecurityException {
        String begin = "-----BEGIN PRIVATE KEY-----";
        int b = pem.indexOf(begin);
        int e = pem.indexOf("-----END PRIVATE KEY-----");
        if (b < 0 || e < b) {
            throw new GeneralSecurityException("want a PKCS#8 \"PRIVATE KEY\" PEM block (convert with: openssl pkcs8 -topk8 -nocrypt)");
        }
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(b + begin.length(), e));
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
        GeneralSecurityException last = null;
        for (String alg : new String[] {"EC", "RSA", "Ed25519"}) {
            try {
                return KeyFactory.getInstance(alg).generatePrivate(spec);
            } catch (GeneralSecurityException ex) {
                last = ex;
            }
        }
        throw new GeneralSecurityException("private key: neither EC, RSA nor Ed25519", last);
    }
}
