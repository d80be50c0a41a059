"""runner_curator.py -- Apache Curator 5.4 (Debian's libcurator-recipes-java):
CuratorBench.java (and CuratorQueue.java, its DistributedQueue modes)
compiled against /usr/share/java, run with `java`; one
CuratorFramework (ZooKeeper session) per client thread.  Each command prints
one JSON line (run it with servers.run_json)."""
import os

from common import HERE
from servers import run

JAVA_DIR = "/usr/share/java"
JARS = ["curator-recipes.jar", "curator-framework.jar", "curator-client.jar",
        "zookeeper.jar", "zookeeper-jute.jar", "guava.jar", "slf4j-api.jar",
        "slf4j-nop.jar"]


def compile_curator(env, build):
    cp = ":".join(os.path.join(JAVA_DIR, j) for j in JARS)
    run(["javac", "-nowarn", "-d", build, "-cp", cp,
         os.path.join(HERE, "CuratorBench.java"), os.path.join(HERE, "CuratorQueue.java")],
        timeout=180)
    env.curator_cp = build + ":" + cp


def curator_cmd(env, *args):
    cp = env.curator_cp
    return ["java", "-Xss512k", "-XX:+UseSerialGC", "-cp", cp, "CuratorBench",
            args[0], env.hosts, *[str(a) for a in args[1:]]]
