/*
 * CuratorLock.java -- drive Apache Curator's lock recipes for zklock's
 * interoperation test (test/t/ops/030_interop.pl).
 *
 * Built at test time against Debian's libcurator-recipes-java (Curator 5.4):
 *
 *   CP=/usr/share/java/curator-recipes.jar:/usr/share/java/curator-framework.jar:\
 *      /usr/share/java/curator-client.jar:/usr/share/java/zookeeper.jar:\
 *      /usr/share/java/zookeeper-jute.jar:/usr/share/java/guava.jar:\
 *      /usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar
 *   javac -cp $CP -d DIR CuratorLock.java
 *   java -cp DIR:$CP CuratorLock ...
 *
 * (Debian's guava.jar carries failureaccess's class; ZooKeeper's client uses
 * its NIO socket, so netty is not needed.)
 *
 * Modes: mutex (InterProcessMutex), read and write (the two halves of
 * InterProcessReadWriteLock).  Every output line starts with a word and ends
 * with the wall-clock time in epoch milliseconds, taken at that moment.
 *
 * One-shot:
 *   CuratorLock HOSTS PATH MODE HOLD_MS
 *     acquires (waiting at most 60 s), prints "ACQUIRED <ms>", holds the lock
 *     HOLD_MS milliseconds, prints "RELEASED <ms>", releases and exits 0
 *     (exit 1 and "TIMEOUT <ms>" if the lock was not granted in time).
 *
 * Long-lived, driven by stdin (one JVM start for many locks):
 *   CuratorLock HOSTS
 *     prints "READY <ms>" once connected, then reads commands, one a line:
 *       acquire ID PATH MODE TIMEOUT_MS  start acquiring in a thread of its own;
 *                                        prints "ACQUIRED ID <ms>" when granted,
 *                                        "TIMEOUT ID <ms>" if not within
 *                                        TIMEOUT_MS (Curator removes its node)
 *       release ID                       prints "RELEASED ID <ms>" (before the
 *                                        release), releases, then prints
 *                                        "GONE ID <ms>" (node deleted)
 *       quit                             closes the client and exits
 *     End of input counts as quit.  Errors print "ERROR ID <message>".
 *     Curator's locks belong to the thread that acquired them, so each ID has
 *     its own thread, which also does the release.
 *
 * Whatever happens, the process exits after CURATOR_LOCK_MAX_SECONDS
 * (default 300) so that a lost test never leaves a JVM behind.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorLock
{
	private static CuratorFramework client;
	private static final Map<String, Holder> holders = new ConcurrentHashMap<>();

	private static synchronized void say(String line)
	{
		System.out.println(line);
		System.out.flush();
	}

	private static long now()
	{
		return System.currentTimeMillis();
	}

	private static InterProcessLock makeLock(String path, String mode)
	{
		switch (mode)
		{
			case "mutex":
				return new InterProcessMutex(client, path);
			case "read":
				return new InterProcessReadWriteLock(client, path).readLock();
			case "write":
				return new InterProcessReadWriteLock(client, path).writeLock();
			default:
				throw new IllegalArgumentException("mode must be mutex, read or write, not \"" + mode + "\"");
		}
	}

	private static void connect(String hosts) throws Exception
	{
		client = CuratorFrameworkFactory.newClient(hosts, 10000, 10000,
												   new ExponentialBackoffRetry(200, 5));
		client.start();
		if (!client.blockUntilConnected(20, TimeUnit.SECONDS))
			throw new Exception("could not connect to ZooKeeper at " + hosts + " within 20 s");
	}

	/* One lock of the long-lived mode, with the thread that owns it */
	private static class Holder extends Thread
	{
		final String id;
		final String path;
		final String mode;
		final long timeoutMs;
		final BlockingQueue<String> commands = new LinkedBlockingQueue<>();

		Holder(String id, String path, String mode, long timeoutMs)
		{
			this.id = id;
			this.path = path;
			this.mode = mode;
			this.timeoutMs = timeoutMs;
			setDaemon(true);
			setName("lock-" + id);
		}

		@Override
		public void run()
		{
			try
			{
				InterProcessLock lock = makeLock(path, mode);
				if (!lock.acquire(timeoutMs, TimeUnit.MILLISECONDS))
				{
					say("TIMEOUT " + id + " " + now());
					return;
				}
				say("ACQUIRED " + id + " " + now());
				for (;;)
				{
					String cmd = commands.take();
					if (cmd.equals("release"))
						break;
				}
				say("RELEASED " + id + " " + now());
				lock.release();
				say("GONE " + id + " " + now());
			}
			catch (InterruptedException e)
			{
				/* quitting */
			}
			catch (Exception e)
			{
				say("ERROR " + id + " " + e.toString().replace('\n', ' '));
			}
			finally
			{
				holders.remove(id, this);
			}
		}
	}

	private static void interactive() throws Exception
	{
		BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
		String line;

		say("READY " + now());
		while ((line = in.readLine()) != null)
		{
			String[] w = line.trim().split("\\s+");

			if (w.length == 0 || w[0].isEmpty())
				continue;
			try
			{
				if (w[0].equals("acquire") && w.length == 5)
				{
					Holder h = new Holder(w[1], w[2], w[3], Long.parseLong(w[4]));

					if (holders.putIfAbsent(w[1], h) != null)
						say("ERROR " + w[1] + " lock id already in use");
					else
						h.start();
				}
				else if (w[0].equals("release") && w.length == 2)
				{
					Holder h = holders.get(w[1]);

					if (h == null)
						say("ERROR " + w[1] + " no such lock");
					else
						h.commands.put("release");
				}
				else if (w[0].equals("quit"))
					break;
				else
					say("ERROR - bad command: " + line);
			}
			catch (Exception e)
			{
				say("ERROR - " + e.toString().replace('\n', ' '));
			}
		}
		/* closing the session removes whatever nodes are left */
		client.close();
		say("BYE " + now());
	}

	private static int oneShot(String path, String mode, long holdMs) throws Exception
	{
		InterProcessLock lock = makeLock(path, mode);

		if (!lock.acquire(60, TimeUnit.SECONDS))
		{
			say("TIMEOUT " + now());
			client.close();
			return 1;
		}
		say("ACQUIRED " + now());
		Thread.sleep(holdMs);
		say("RELEASED " + now());
		lock.release();
		client.close();
		return 0;
	}

	public static void main(String[] args)
	{
		long maxSeconds = 300;
		String env = System.getenv("CURATOR_LOCK_MAX_SECONDS");

		if (env != null && !env.isEmpty())
			maxSeconds = Long.parseLong(env);
		final long maxMs = maxSeconds * 1000;
		Thread watchdog = new Thread(() -> {
			try
			{
				Thread.sleep(maxMs);
			}
			catch (InterruptedException e)
			{
				return;
			}
			say("ERROR - CuratorLock: lifetime limit reached, exiting");
			Runtime.getRuntime().halt(3);
		});
		watchdog.setDaemon(true);
		watchdog.start();

		if (args.length != 1 && args.length != 4)
		{
			System.err.println("usage: CuratorLock HOSTS PATH mutex|read|write HOLD_MS\n"
							   + "       CuratorLock HOSTS    (commands on stdin)");
			System.exit(2);
		}
		int rc;
		try
		{
			connect(args[0]);
			if (args.length == 1)
			{
				interactive();
				rc = 0;
			}
			else
				rc = oneShot(args[1], args[2], Long.parseLong(args[3]));
		}
		catch (Exception e)
		{
			say("ERROR - " + e.toString().replace('\n', ' '));
			rc = 1;
		}
		/* Curator's and ZooKeeper's threads must not keep the JVM alive */
		System.out.flush();
		Runtime.getRuntime().halt(rc);
	}
}
