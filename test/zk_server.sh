#!/usr/bin/env bash
#
# zk_server.sh -- run a throw-away ZooKeeper (standalone or a 3-server
# ensemble) on 127.0.0.1 for zklock's tests, from Debian's `zookeeper` jars.
#
# Usage:
#   zk_server.sh start   <dir> [--servers 1|3] [--base-port N | --ports LIST]
#                              [--owner-pid PID] [--quorum-via LIST]
#                              [--config FILE] [--extra-config FILE]
#                              [--tls-only CERTDIR]
#   zk_server.sh stop    <dir>
#   zk_server.sh status  <dir>          one line per server; exit 0 iff all serve
#   zk_server.sh hosts   <dir>          print the connect string
#   zk_server.sh leader  <dir>          print the number of the leader (srvr 4lw)
#   zk_server.sh kill    <dir> <n>      SIGKILL server n
#   zk_server.sh stopsig <dir> <n> STOP|CONT   freeze / thaw server n
#   zk_server.sh restart-one <dir> <n>  stop server n if running, start it again
#   zk_server.sh 4lw     <dir> <n> <cmd>       send a four-letter word to server n
#
# Ports: with --base-port N (default 21810), server i (1-based) listens for
# clients on N+3(i-1) and, in an ensemble, uses N+3(i-1)+1 as quorum port and
# N+3(i-1)+2 as election port.  --ports gives them explicitly instead, as a
# comma-separated list: "client" for one server, or
# "c1,q1,e1,c2,q2,e2,c3,q3,e3" for three.
#
# On start, prints the connect string ("127.0.0.1:21810" or
# "127.0.0.1:21810,127.0.0.1:21813,127.0.0.1:21816") on stdout and nothing
# else; progress and errors go to stderr.  Waits (bounded, ZK_START_TIMEOUT,
# default 30 s) until every server answers `srvr` with a Mode line, i.e. is
# actually serving (an ensemble member only serves once a quorum is formed);
# on failure prints the log tails and exits 1.
#
# Files in <dir>: zk.env (settings), server<N>.cfg, data<N>/ (with myid),
# server<N>.pid, server<N>.log.
#
# --quorum-via LIST (ensemble only): comma-separated "i:j:port" entries;
# server i then reaches server j's quorum port at 127.0.0.1:port (e.g. a
# proxy the test owns, test/zk_proxy.py) instead of j's own quorum port:
# only server i's configuration names it.  A learner connects to its
# leader's quorum port, so this routes i's traffic with leader j through
# that port; election traffic stays direct.  (With reconfigEnabled=false a
# server keeps its own view of the others' addresses.)
#
# --config FILE (ensemble only): take every setting from FILE (e.g. the
# operators' example, scripts/zookeeper/zoo.cfg) except dataDir, dataLogDir,
# clientPort, clientPortAddress and the server.N lines, which are this
# script's (loopback, the ports above, <dir>/data<N>).  ZK_TICK_TIME and this
# script's other defaults then do not apply; FILE must allow the srvr word.
#
# --extra-config FILE: lines appended to every server's configuration, after
# this script's own (e.g. secureClientPort=PORT, serverCnxnFactory, ssl.*,
# authProvider.*: test/t/ops/113_tls.pl).  ZooKeeper makes a key it does
# not know into the system property zookeeper.<key>.  The plain clientPort
# stays (this script asks it srvr), unless --tls-only.
#
# --tls-only CERTDIR (one server): no plain clientPort at all; the
# extra configuration's secureClientPort is the server's client port (the
# connect string printed, zk.env's CPORT_1), and this script asks srvr
# over TLS (openssl s_client) with CERTDIR's ca.pem and the client
# certificate inspect.pem / inspect.key (test/tls_certs.sh makes them).
#
# --owner-pid PID: also start a small watchdog that stops the servers when
# process PID is gone (so that a test killed hard does not leak Java
# processes).
#
# Running as root: ZooKeeper itself is then run as the unprivileged user
# $ZK_RUN_AS (default "postgres") through runuser, and <dir> is chown'ed to
# that user.  As any other user it runs as that user.
#
# Environment: JAVA (default: java on PATH, else /usr/bin/java),
# ZK_JAVA_DIR (default /usr/share/java), ZK_TICK_TIME (default 200 ms),
# ZK_START_TIMEOUT (default 30 s, or initLimit (20) ticks + 20 s if longer:
# a server elected leader whose voters went on to follow another waits that
# long for a follower, and does not serve, before it elects again),
# ZK_JVM_OPTS (extra JVM options),
# ZK_LOG_LEVEL (slf4j-simple level, default info).

set -u

PROG=$(basename "$0")
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
JAVA=${JAVA:-$(command -v java || echo /usr/bin/java)}
ZK_JAVA_DIR=${ZK_JAVA_DIR:-/usr/share/java}
ZK_TICK_TIME=${ZK_TICK_TIME:-200}
ZK_START_TIMEOUT=${ZK_START_TIMEOUT:-$(( ZK_TICK_TIME * 20 / 1000 + 20 > 30 ?
	ZK_TICK_TIME * 20 / 1000 + 20 : 30 ))}
ZK_RUN_AS=${ZK_RUN_AS:-postgres}
ZK_LOG_LEVEL=${ZK_LOG_LEVEL:-info}

die() { echo "$PROG: $*" >&2; exit 1; }
msg() { echo "$PROG: $*" >&2; }

usage() {
	sed -n '5,23p' "$SELF" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# ---------------------------------------------------------------------------
# helpers

# fourlw PORT CMD: send a four-letter word, print the answer (bounded);
# over TLS when zk.env says TLS_DIR (--tls-only).
fourlw() {
	if [ -n "${TLS_DIR:-}" ]; then
		printf "%s" "$2" | timeout 3 openssl s_client -quiet \
			-connect "127.0.0.1:$1" -CAfile "$TLS_DIR/ca.pem" \
			-cert "$TLS_DIR/inspect.pem" -key "$TLS_DIR/inspect.key" 2>/dev/null
		return
	fi
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "%s" "$1" >&3
		cat <&3' "$1" "$2" 2>/dev/null
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

server_pid() { # n
	local f="$DIR/server$1.pid"
	[ -s "$f" ] && cat "$f"
}

load_env() {
	[ -f "$DIR/zk.env" ] || die "no ZooKeeper set up in $DIR (missing zk.env)"
	# shellcheck disable=SC1091
	. "$DIR/zk.env"
}

client_port() { local v="CPORT_$1"; echo "${!v}"; }

connect_string() {
	local i s=""
	for ((i = 1; i <= SERVERS; i++)); do
		s="${s:+$s,}127.0.0.1:$(client_port "$i")"
	done
	echo "$s"
}

classpath() {
	local cp="" j
	# zookeeper.jar's manifest Class-Path pulls in netty, metrics, snappy,
	# commons-cli, jetty, jackson...; add jute and an slf4j binding.
	for j in zookeeper.jar zookeeper-jute.jar slf4j-api.jar slf4j-simple.jar \
		netty-handler.jar netty-common.jar netty-buffer.jar \
		netty-transport.jar netty-codec.jar netty-resolver.jar \
		netty-transport-native-epoll.jar \
		netty-transport-native-unix-common.jar \
		metrics-core.jar snappy-java.jar commons-cli.jar; do
		[ -f "$ZK_JAVA_DIR/$j" ] && cp="${cp:+$cp:}$ZK_JAVA_DIR/$j"
	done
	echo "$cp"
}

log_tail() { # n
	local f="$DIR/server$1.log"
	if [ -f "$f" ]; then
		echo "----- tail of $f -----" >&2
		tail -n 40 "$f" >&2
		echo "-----" >&2
	fi
}

# launch N: start the JVM of server n in the background, record its pid.
launch() {
	local n=$1 main cfg="$DIR/server$1.cfg" log="$DIR/server$1.log"
	local pidfile="$DIR/server$1.pid"
	if [ "$SERVERS" -eq 1 ]; then
		main=org.apache.zookeeper.server.ZooKeeperServerMain
	else
		main=org.apache.zookeeper.server.quorum.QuorumPeerMain
	fi
	local -a jvm=(
		"$JAVA" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
		-XX:-UsePerfData -Djava.net.preferIPv4Stack=true
		-Dzookeeper.admin.enableServer=false
		-Dzookeeper.4lw.commands.whitelist='*'
		-Dznode.container.checkIntervalMs=1000
		-Dznode.container.maxPerMinute=10000
		-Dzookeeper.forceSync=no
		-Dzookeeper.jmx.log4j.disable=true
		-Dorg.slf4j.simpleLogger.defaultLogLevel="$ZK_LOG_LEVEL"
		-Dorg.slf4j.simpleLogger.showDateTime=true
		-Dorg.slf4j.simpleLogger.dateTimeFormat='yyyy-MM-dd HH:mm:ss.SSS'
		${ZK_JVM_OPTS:-}
		-cp "$(classpath)" "$main" "$cfg"
	)
	local -a as=()
	if [ "$(id -u)" -eq 0 ]; then
		as=(runuser -u "$ZK_RUN_AS" --)
	fi
	rm -f "$pidfile"
	echo "=== $(date '+%F %T') starting server $n ===" >>"$log"
	# The shell records its own pid, then execs the JVM: the pid file holds
	# the JVM's pid even when started through runuser.
	# shellcheck disable=SC2016
	nohup "${as[@]}" sh -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "${jvm[@]}" \
		>>"$log" 2>&1 </dev/null &
	local i
	for ((i = 0; i < 100; i++)); do
		[ -s "$pidfile" ] && return 0
		sleep 0.05
	done
	die "server $n did not record its pid in $pidfile"
}

# wait_serving N DEADLINE(epoch s): wait until server n answers srvr with Mode.
wait_serving() {
	local n=$1 deadline=$2 port pid out
	port=$(client_port "$n")
	while :; do
		pid=$(server_pid "$n")
		if ! pid_alive "$pid"; then
			msg "server $n (pid ${pid:-?}) exited during startup"
			log_tail "$n"
			return 1
		fi
		out=$(fourlw "$port" srvr)
		case "$out" in
		*"Mode: "*) return 0 ;;
		esac
		if [ "$(date +%s)" -ge "$deadline" ]; then
			msg "server $n (port $port) not serving after ${ZK_START_TIMEOUT}s; last srvr answer: ${out:-<none>}"
			log_tail "$n"
			return 1
		fi
		sleep 0.2
	done
}

# stop_one N [SIG]: stop server n and wait for it to be gone (bounded).
stop_one() {
	local n=$1 sig=${2:-TERM} pid i
	pid=$(server_pid "$n")
	if pid_alive "$pid"; then
		kill -"$sig" "$pid" 2>/dev/null
		kill -CONT "$pid" 2>/dev/null # in case it was frozen by stopsig
		for ((i = 0; i < 50; i++)); do
			pid_alive "$pid" || break
			sleep 0.1
		done
		if pid_alive "$pid"; then
			kill -KILL "$pid" 2>/dev/null
			for ((i = 0; i < 50; i++)); do
				pid_alive "$pid" || break
				sleep 0.1
			done
		fi
		pid_alive "$pid" && { msg "server $n (pid $pid) would not die"; return 1; }
	fi
	rm -f "$DIR/server$n.pid"
	return 0
}

check_n() {
	[[ "${1:-}" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$SERVERS" ] ||
		die "server number must be 1..$SERVERS"
}

# ---------------------------------------------------------------------------
# commands

cmd_start() {
	local servers=1 base=21810 ports="" owner="" via="" config="" extra="" tls_only=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--servers) servers=${2:-}; shift 2 ;;
		--servers=*) servers=${1#*=}; shift ;;
		--base-port) base=${2:-}; shift 2 ;;
		--base-port=*) base=${1#*=}; shift ;;
		--ports) ports=${2:-}; shift 2 ;;
		--ports=*) ports=${1#*=}; shift ;;
		--owner-pid) owner=${2:-}; shift 2 ;;
		--owner-pid=*) owner=${1#*=}; shift ;;
		--quorum-via) via=${2:-}; shift 2 ;;
		--quorum-via=*) via=${1#*=}; shift ;;
		--config) config=${2:-}; shift 2 ;;
		--config=*) config=${1#*=}; shift ;;
		--extra-config) extra=${2:-}; shift 2 ;;
		--extra-config=*) extra=${1#*=}; shift ;;
		--tls-only) tls_only=${2:-}; shift 2 ;;
		--tls-only=*) tls_only=${1#*=}; shift ;;
		*) die "unknown option $1" ;;
		esac
	done
	case "$servers" in 1 | 3) ;; *) die "--servers must be 1 or 3" ;; esac
	[[ "$base" =~ ^[0-9]+$ ]] || die "bad --base-port"
	if [ -n "$config" ]; then
		[ "$servers" -gt 1 ] || die "--config needs an ensemble (--servers 3)"
		[ -r "$config" ] || die "cannot read $config"
	fi
	if [ -n "$extra" ]; then
		[ -r "$extra" ] || die "cannot read $extra"
	fi
	local secure=""
	if [ -n "$tls_only" ]; then
		[ "$servers" -eq 1 ] || die "--tls-only needs one server"
		[ -r "$tls_only/inspect.key" ] || die "--tls-only: no $tls_only/inspect.key (test/tls_certs.sh)"
		secure=$(sed -nE 's/^[[:space:]]*secureClientPort[[:space:]]*=[[:space:]]*([0-9]+).*/\1/p' "${extra:-/dev/null}" | head -n 1)
		[ -n "$secure" ] || die "--tls-only needs secureClientPort in --extra-config"
		tls_only=$(cd "$tls_only" && pwd)
	fi

	mkdir -p "$DIR" || die "cannot create $DIR"
	DIR=$(cd "$DIR" && pwd)
	if [ -f "$DIR/zk.env" ]; then
		local i pid
		# shellcheck disable=SC1091
		(. "$DIR/zk.env"; for ((i = 1; i <= SERVERS; i++)); do
			pid=$(cat "$DIR/server$i.pid" 2>/dev/null)
			pid_alive "$pid" && exit 1
		done; exit 0) || die "a ZooKeeper is already running in $DIR (stop it first)"
	fi

	local -a c q e
	local i
	if [ -n "$ports" ]; then
		IFS=, read -r -a plist <<<"$ports"
		if [ "$servers" -eq 1 ]; then
			[ "${#plist[@]}" -ge 1 ] || die "--ports needs 1 port"
			c[1]=${plist[0]}
		else
			[ "${#plist[@]}" -eq 9 ] || die "--ports needs 9 ports for 3 servers"
			for ((i = 1; i <= 3; i++)); do
				c[i]=${plist[3 * (i - 1)]}
				q[i]=${plist[3 * (i - 1) + 1]}
				e[i]=${plist[3 * (i - 1) + 2]}
			done
		fi
	else
		for ((i = 1; i <= servers; i++)); do
			c[i]=$((base + 3 * (i - 1)))
			q[i]=$((base + 3 * (i - 1) + 1))
			e[i]=$((base + 3 * (i - 1) + 2))
		done
	fi

	# qvia[i*10+j]: the port at which server i reaches j's quorum port
	local -A qvia=()
	if [ -n "$via" ]; then
		[ "$servers" -gt 1 ] || die "--quorum-via needs an ensemble"
		local ent vi vj vp
		IFS=, read -r -a vlist <<<"$via"
		for ent in "${vlist[@]}"; do
			IFS=: read -r vi vj vp <<<"$ent"
			[[ "$vi" =~ ^[1-3]$ && "$vj" =~ ^[1-3]$ && "$vp" =~ ^[0-9]+$ && "$vi" != "$vj" ]] ||
				die "bad --quorum-via entry '$ent' (want i:j:port, i != j)"
			qvia[$((vi * 10 + vj))]=$vp
		done
	fi

	[ -n "$secure" ] && c[1]=$secure
	{
		echo "SERVERS=$servers"
		[ -n "$tls_only" ] && echo "TLS_DIR=$tls_only"
		for ((i = 1; i <= servers; i++)); do
			echo "CPORT_$i=${c[i]}"
		done
	} >"$DIR/zk.env"

	for ((i = 1; i <= servers; i++)); do
		mkdir -p "$DIR/data$i"
		if [ -n "$config" ]; then
			{
				echo "# written by $PROG from $config"
				grep -vE '^[[:space:]]*(#|$)' "$config" |
					grep -vE '^[[:space:]]*(dataDir|dataLogDir|clientPort|clientPortAddress|server\.[0-9]+)[[:space:]]*='
				echo "dataDir=$DIR/data$i"
				local j
				for ((j = 1; j <= servers; j++)); do
					echo "server.$j=127.0.0.1:${qvia[$((i * 10 + j))]:-${q[j]}}:${e[j]};127.0.0.1:${c[j]}"
				done
				if [ -n "$extra" ]; then
					echo "# from $extra"
					cat "$extra"
				fi
			} >"$DIR/server$i.cfg"
			echo "$i" >"$DIR/data$i/myid"
			continue
		fi
		{
			echo "# written by $PROG"
			echo "tickTime=$ZK_TICK_TIME"
			echo "initLimit=20"
			echo "syncLimit=10"
			echo "dataDir=$DIR/data$i"
			echo "maxClientCnxns=0"
			echo "minSessionTimeout=$((2 * ZK_TICK_TIME))"
			echo "maxSessionTimeout=60000"
			echo "admin.enableServer=false"
			echo "4lw.commands.whitelist=*"
			echo "autopurge.purgeInterval=0"
			if [ "$servers" -eq 1 ] && [ -n "$tls_only" ]; then
				: # the secure port alone (--extra-config)
			elif [ "$servers" -eq 1 ]; then
				echo "clientPort=${c[i]}"
				echo "clientPortAddress=127.0.0.1"
			else
				echo "reconfigEnabled=false"
				echo "standaloneEnabled=false"
				local j
				for ((j = 1; j <= servers; j++)); do
					echo "server.$j=127.0.0.1:${qvia[$((i * 10 + j))]:-${q[j]}}:${e[j]};127.0.0.1:${c[j]}"
				done
			fi
			if [ -n "$extra" ]; then
				echo "# from $extra"
				cat "$extra"
			fi
		} >"$DIR/server$i.cfg"
		[ "$servers" -gt 1 ] && echo "$i" >"$DIR/data$i/myid"
	done

	if [ "$(id -u)" -eq 0 ]; then
		chown -R "$ZK_RUN_AS" "$DIR" || die "cannot chown $DIR to $ZK_RUN_AS"
	fi

	load_env
	for ((i = 1; i <= SERVERS; i++)); do
		launch "$i"
	done
	local deadline=$(($(date +%s) + ZK_START_TIMEOUT))
	for ((i = 1; i <= SERVERS; i++)); do
		if ! wait_serving "$i" "$deadline"; then
			for ((i = 1; i <= SERVERS; i++)); do stop_one "$i" KILL; done
			exit 1
		fi
	done

	if [ -n "$owner" ]; then
		# Watchdog: stop the servers once the owner process is gone.
		nohup "$SELF" _watchdog "$DIR" "$owner" \
			>>"$DIR/watchdog.log" 2>&1 </dev/null &
		echo $! >"$DIR/watchdog.pid"
	fi
	msg "ZooKeeper ($SERVERS server(s)) serving in $DIR"
	connect_string
}

# _watchdog DIR OWNER: while OWNER lives, remember the servers' pids; then
# stop the servers -- through DIR if it is still there, else by the pids
# remembered (so that deleting DIR early cannot leak Java processes).
cmd_watchdog() {
	local owner=$1 i pid
	local -A known=()
	load_env
	while [ -e "/proc/$owner" ] || kill -0 "$owner" 2>/dev/null; do
		for ((i = 1; i <= SERVERS; i++)); do
			pid=$(cat "$DIR/server$i.pid" 2>/dev/null) && [ -n "$pid" ] && known[$i]=$pid
		done
		sleep 1
	done
	if [ -f "$DIR/zk.env" ]; then
		msg "owner $owner gone, stopping servers"
		rm -f "$DIR/watchdog.pid"
		exec "$SELF" stop "$DIR"
	fi
	msg "owner $owner gone and $DIR removed, killing remembered servers"
	for pid in "${known[@]}"; do
		# only what is still one of our ZooKeeper JVMs (pids get reused)
		grep -qa "$DIR/server" "/proc/$pid/cmdline" 2>/dev/null &&
			kill -KILL "$pid" 2>/dev/null
	done
	exit 0
}

cmd_stop() {
	[ -f "$DIR/zk.env" ] || { msg "nothing to stop in $DIR"; return 0; }
	load_env
	local i rc=0 pid
	# Signal all servers first, then wait for each: stopping is then not
	# SERVERS times as slow as stopping one.
	for ((i = 1; i <= SERVERS; i++)); do
		pid=$(server_pid "$i")
		if pid_alive "$pid"; then
			kill -TERM "$pid" 2>/dev/null
			kill -CONT "$pid" 2>/dev/null
		fi
	done
	for ((i = 1; i <= SERVERS; i++)); do
		stop_one "$i" TERM || rc=1
	done
	local w
	w=$(cat "$DIR/watchdog.pid" 2>/dev/null)
	if [ -n "$w" ] && [ "$w" != "$$" ] && pid_alive "$w"; then
		kill "$w" 2>/dev/null
	fi
	rm -f "$DIR/watchdog.pid"
	return $rc
}

cmd_status() {
	load_env
	local i pid out mode rc=0
	for ((i = 1; i <= SERVERS; i++)); do
		pid=$(server_pid "$i")
		if ! pid_alive "$pid"; then
			echo "server $i: down (port $(client_port "$i"))"
			rc=1
			continue
		fi
		if [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = T ]; then
			echo "server $i: pid $pid port $(client_port "$i") stopped (SIGSTOP)"
			rc=1
			continue
		fi
		out=$(fourlw "$(client_port "$i")" srvr)
		mode=$(printf '%s\n' "$out" | sed -n 's/^Mode: //p')
		if [ -n "$mode" ]; then
			echo "server $i: pid $pid port $(client_port "$i") mode $mode"
		else
			echo "server $i: pid $pid port $(client_port "$i") not serving"
			rc=1
		fi
	done
	return $rc
}

cmd_leader() {
	load_env
	local i out
	for ((i = 1; i <= SERVERS; i++)); do
		pid_alive "$(server_pid "$i")" || continue
		out=$(fourlw "$(client_port "$i")" srvr)
		case "$out" in
		*"Mode: leader"* | *"Mode: standalone"*)
			echo "$i"
			return 0
			;;
		esac
	done
	msg "no leader found"
	return 1
}

cmd_kill() {
	load_env
	check_n "${1:-}"
	stop_one "$1" KILL
}

cmd_stopsig() {
	load_env
	check_n "${1:-}"
	local pid
	pid=$(server_pid "$1")
	pid_alive "$pid" || die "server $1 is not running"
	case "${2:-}" in
	STOP | CONT) kill -"$2" "$pid" ;;
	*) die "stopsig needs STOP or CONT" ;;
	esac
}

cmd_restart_one() {
	load_env
	check_n "${1:-}"
	stop_one "$1" TERM || exit 1
	launch "$1"
	wait_serving "$1" $(($(date +%s) + ZK_START_TIMEOUT)) || exit 1
	msg "server $1 serving again"
}

cmd_4lw() {
	load_env
	check_n "${1:-}"
	[ -n "${2:-}" ] || die "4lw needs a command"
	fourlw "$(client_port "$1")" "$2"
}

# ---------------------------------------------------------------------------

[ $# -ge 2 ] || usage
CMD=$1
DIR=$2
shift 2

case "$CMD" in
start) cmd_start "$@" ;;
stop) cmd_stop ;;
status) cmd_status ;;
hosts) load_env; connect_string ;;
leader) cmd_leader ;;
kill) cmd_kill "$@" ;;
stopsig) cmd_stopsig "$@" ;;
restart-one) cmd_restart_one "$@" ;;
4lw) cmd_4lw "$@" ;;
_watchdog) cmd_watchdog "$@" ;;
*) usage ;;
esac
