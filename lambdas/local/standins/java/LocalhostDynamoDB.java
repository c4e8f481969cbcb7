import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.io.EndPoint;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Starts DynamoDB Local listening on one address (127.0.0.1 unless -Dddb.host says otherwise).
 * The stock jar creates Jetty with new Server(port), which listens on every interface; this
 * launcher sets the host on each connector before starting. With -Dddb.exitOnStdinEof=true it
 * also stops (gracefully, within 5 s) when its standard input closes, so it never outlives the
 * process that started it, even when that process is killed with SIGKILL.
 *
 * SIGHUP is a crash that keeps what was acknowledged, as a DynamoDB outage does: the listening
 * sockets and every open connection are cut at once (a request in flight may commit with its
 * answer lost), then the database closes and the process halts. SIGKILL of DynamoDB Local loses
 * the last writes it acknowledged, which DynamoDB never does, so the chaos suite uses this.
 *
 * With -Dddb.anyPort=true the connectors listen on a port the system picks (the stock CLI
 * refuses -port 0), so no other process can take a probed port between the probe and the
 * bind. Once listening, the launcher prints one line READY_PREFIX{"port":N} on standard output:
 * only that line, from this process, tells the Host the server is up, and on which port.
 */
public class LocalhostDynamoDB {
  static final String READY_PREFIX = "takoform-dynamodb-ready ";

  public static void main(String[] args) throws Exception {
    String host = System.getProperty("ddb.host", "127.0.0.1");
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
    if (proxy == null) return;
    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server jetty = (Server) field.get(proxy);
    boolean anyPort = Boolean.getBoolean("ddb.anyPort");
    for (Connector connector : jetty.getConnectors()) {
      if (connector instanceof ServerConnector sc) {
        sc.setHost(host);
        if (anyPort) sc.setPort(0);
      }
    }
    sun.misc.Signal.handle(new sun.misc.Signal("HUP"), signal -> {
      Thread crash = new Thread(() -> crash(proxy, jetty), "crash");
      crash.start();
    });
    if (Boolean.getBoolean("ddb.exitOnStdinEof")) {
      Thread watchdog = new Thread(() -> {
        try {
          while (System.in.read() != -1) { }
        } catch (Exception ignored) { }
        // Stop the server first (in-flight requests finish, the database closes), so a write
        // acknowledged just before the Host died is not lost with the process; halt within 5 s
        // whatever happens.
        stopAndHalt(proxy, 0);
      }, "stdin-watchdog");
      watchdog.setDaemon(true);
      watchdog.start();
    }
    try {
      proxy.start();
    } catch (Exception e) {
      // A port already taken, for example: say so and end, so the Host can try another.
      System.err.println("DynamoDB Local did not start: " + e);
      Runtime.getRuntime().halt(1);
    }
    for (Connector connector : jetty.getConnectors()) {
      if (connector instanceof ServerConnector sc) {
        System.out.println(READY_PREFIX + "{\"port\":" + sc.getLocalPort() + "}");
        System.out.flush();
        break;
      }
    }
    proxy.join();
  }

  /** Cuts the listening sockets and every open connection at once, then stops and halts. */
  private static void crash(DynamoDBProxyServer proxy, Server jetty) {
    for (Connector connector : jetty.getConnectors()) {
      try {
        if (connector instanceof ServerConnector sc) sc.close();
        for (EndPoint endPoint : connector.getConnectedEndPoints()) endPoint.close();
      } catch (Exception ignored) { }
    }
    stopAndHalt(proxy, 137);
  }

  /** Stops the server (the database closes) and halts with `status`, within 5 s whatever happens. */
  private static void stopAndHalt(DynamoDBProxyServer proxy, int status) {
    Thread bound = new Thread(() -> {
      try { Thread.sleep(5000); } catch (InterruptedException ignored) { }
      Runtime.getRuntime().halt(status);
    }, "halt-bound");
    bound.setDaemon(true);
    bound.start();
    try {
      proxy.stop();
    } catch (Exception ignored) { }
    Runtime.getRuntime().halt(status);
  }
}
