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
 */
public class LocalhostDynamoDB {
  public static void main(String[] args) throws Exception {
    String host = System.getProperty("ddb.host", "127.0.0.1");
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
    if (proxy == null) return;
    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server jetty = (Server) field.get(proxy);
    for (Connector connector : jetty.getConnectors()) {
      if (connector instanceof ServerConnector sc) sc.setHost(host);
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
    proxy.start();
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
