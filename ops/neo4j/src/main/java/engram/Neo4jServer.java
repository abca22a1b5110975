package engram;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.fleetmanagement.FleetManagementSettings;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Transaction;
import org.neo4j.logging.Level;
import org.neo4j.logging.log4j.Log4jLogProvider;

/**
 * Minimal Neo4j 5.26 Community server for local Engram development.
 *
 * <p>Runs the embedded DBMS (Maven Central artifacts, no tarball) with only the Bolt connector,
 * bound to a loopback address, auth enabled, and the {@code neo4j} user's password forced to the
 * configured value at every start (idempotent).
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' engram.Neo4jServer [HOME_DIR [PORT]]
 *
 * HOME_DIR   server home; data in HOME_DIR/data, logs in HOME_DIR/logs   (env ENGRAM_NEO4J_HOME)
 * PORT       Bolt port, default 7687                                      (env ENGRAM_NEO4J_PORT)
 * env ENGRAM_NEO4J_PASSWORD   password of user neo4j (required, >= 8 chars; read from env so it
 *                             never shows up in `ps`)
 * env ENGRAM_NEO4J_HOST       listen host, default 127.0.0.1
 * env ENGRAM_NEO4J_PAGECACHE  page cache size, default 512m (k/m/g suffixes)
 * optional HOME_DIR/neo4j.conf  extra settings (neo4j.conf syntax), applied before ours
 * </pre>
 *
 * <p>Prints exactly one line {@code neo4j ready on bolt://HOST:PORT} on stdout once the password
 * is in place and Bolt is accepting connections. SIGTERM/SIGINT trigger a clean shutdown.
 */
public final class Neo4jServer {

    private static final String USER = "neo4j";
    private static final int MIN_PASSWORD_LENGTH = 8; // Neo4j's default auth_minimum_password_length

    private Neo4jServer() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = System.out;

        String homeArg = args.length > 0 ? args[0] : env("ENGRAM_NEO4J_HOME", null);
        if (homeArg == null || homeArg.isBlank()) {
            fail("usage: engram.Neo4jServer HOME_DIR [PORT]  (or set ENGRAM_NEO4J_HOME)");
        }
        int port = parsePort(args.length > 1 ? args[1] : env("ENGRAM_NEO4J_PORT", "7687"));
        String host = env("ENGRAM_NEO4J_HOST", "127.0.0.1");
        String password = env("ENGRAM_NEO4J_PASSWORD", null);
        if (password == null || password.isEmpty()) {
            fail("ENGRAM_NEO4J_PASSWORD must be set");
        }
        if (password.length() < MIN_PASSWORD_LENGTH) {
            fail("ENGRAM_NEO4J_PASSWORD must be at least " + MIN_PASSWORD_LENGTH + " characters");
        }
        long pageCache = parseBytes(env("ENGRAM_NEO4J_PAGECACHE", "512m"));

        Path home = Path.of(homeArg).toAbsolutePath().normalize();
        Path logs = home.resolve("logs");
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(logs);

        DatabaseManagementServiceBuilder builder = new DatabaseManagementServiceBuilder(home);
        Path extraConf = home.resolve("neo4j.conf");
        if (Files.isRegularFile(extraConf)) {
            builder.loadPropertiesFromFile(extraConf);
        }
        builder.setConfig(Map.of(
                GraphDatabaseSettings.logs_directory, logs,
                GraphDatabaseSettings.auth_enabled, true,
                GraphDatabaseSettings.pagecache_memory, pageCache,
                GraphDatabaseSettings.udc_enabled, false,
                GraphDatabaseInternalSettings.udc_network_enabled, false,
                GraphDatabaseSettings.preallocate_logical_logs, false,
                BoltConnector.enabled, true,
                BoltConnector.listen_address, new SocketAddress(host, port),
                BoltConnector.advertised_address, new SocketAddress(host, port)));
        // Neo4j's "user log" (what neo4j.log would contain) goes to stdout -> launcher log file;
        // debug.log is written by Neo4j itself into HOME_DIR/logs.
        // Netty's default 5 s shutdown quiet period (per event-loop group) makes a clean stop take
        // ~12 s even though the databases are checkpointed and closed within ~1 s.
        builder.setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, Duration.ofSeconds(1));
        // Neo4j 2026.x: no Fleet Manager (Aura console reporting) and no UDP fleet discovery
        // broadcast (server.fleet_discovery.enabled, on by default).
        builder.setConfig(FleetManagementSettings.fleet_manager_enabled, false);
        builder.setConfig(BoltConnector.enable_discovery, false);
        // One plan per statement, whatever the lengths of its list parameters. By default Neo4j
        // plans a statement again for each size class of its lists (1, a few, tens, ...), and a
        // class of the write path's statements cost 0.5-0.7 s of planning here: the first
        // one-document write after a load in 128-document batches waited 1.1-1.9 s for it (engram
        // bench's first write -> searchable round; docs/bench/figures.md). Every list Engram sends
        // feeds lookups by key or filters, whose plans do not depend on its length.
        builder.setConfig(GraphDatabaseInternalSettings.cypher_size_hint_parameters, false);
        builder.setUserLogProvider(new Log4jLogProvider(out, Level.INFO));

        DatabaseManagementService dbms = builder.build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            out.println("neo4j shutting down");
            out.flush();
            try {
                dbms.shutdown();
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                out.println("neo4j stopped");
                out.flush();
                stopped.countDown();
            }
        }, "engram-neo4j-shutdown"));

        try {
            ensurePassword(dbms, password, out);
            // Fail fast if the default database cannot serve queries.
            GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
            try (Transaction tx = db.beginTx()) {
                tx.execute("RETURN 1").close();
                tx.commit();
            }
        } catch (Throwable t) {
            System.err.println("neo4j failed to initialise: " + t);
            t.printStackTrace();
            System.exit(1); // runs the shutdown hook
        }

        out.println("neo4j ready on bolt://" + host + ":" + port);
        out.flush();
        stopped.await();
    }

    /** Sets the neo4j user's password (no forced change); a no-op if it already has it. */
    private static void ensurePassword(DatabaseManagementService dbms, String password, PrintStream out) {
        GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
        try (Transaction tx = system.beginTx()) {
            tx.execute("ALTER USER " + USER + " SET PASSWORD $p CHANGE NOT REQUIRED", Map.of("p", password))
                    .close();
            tx.commit();
            out.println("neo4j password for user '" + USER + "' set");
            return;
        } catch (RuntimeException e) {
            if (!isSamePasswordError(e)) {
                throw e;
            }
        }
        // Password already correct; only make sure no change is pending.
        try (Transaction tx = system.beginTx()) {
            tx.execute("ALTER USER " + USER + " SET PASSWORD CHANGE NOT REQUIRED").close();
            tx.commit();
        }
        out.println("neo4j password for user '" + USER + "' unchanged");
    }

    private static boolean isSamePasswordError(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String m = t.getMessage();
            if (m != null && m.toLowerCase(Locale.ROOT).contains("cannot be the same")) {
                return true;
            }
        }
        return false;
    }

    private static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    private static int parsePort(String s) {
        try {
            int p = Integer.parseInt(s.trim());
            if (p > 0 && p < 65536) {
                return p;
            }
        } catch (NumberFormatException ignored) {
            // fall through
        }
        fail("invalid port: " + s);
        return -1;
    }

    private static long parseBytes(String s) {
        String v = s.trim().toLowerCase(Locale.ROOT);
        long mult = 1;
        if (v.endsWith("k")) {
            mult = 1L << 10;
        } else if (v.endsWith("m")) {
            mult = 1L << 20;
        } else if (v.endsWith("g")) {
            mult = 1L << 30;
        }
        if (mult != 1) {
            v = v.substring(0, v.length() - 1);
        }
        try {
            return Long.parseLong(v) * mult;
        } catch (NumberFormatException e) {
            fail("invalid size: " + s);
            return -1;
        }
    }

    private static void fail(String msg) {
        System.err.println("engram.Neo4jServer: " + msg);
        System.exit(2);
    }
}
