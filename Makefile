# zklock: ZooKeeper locks for PostgreSQL (PGXS)

MODULE_big = zklock
# the objects by folder, from the bottom up (doc/design.md: the map; each
# folder's README: what lives there and what it may call)
OBJS_COMMON = \
	src/common/channel.o \
	src/common/channel_limits.o \
	src/common/channel_consume.o \
	src/common/shmem.o \
	src/common/lease.o \
	src/common/grant_rule.o \
	src/common/queue_name.o \
	src/common/resource.o \
	src/common/nodedata.o \
	src/common/stats.o \
	src/common/wait_events.o \
	src/common/failpoint.o \
	src/common/election_common.o
OBJS_CLIENT = \
	src/client/zk_client.o \
	src/client/zk_secure.o \
	src/client/zk_krb5.o \
	src/client/zk_unwatch.o \
	src/client/zk_events.o \
	src/client/zk_multi.o
OBJS_WORKER = \
	src/worker/worker.o \
	src/worker/worker_signals.o \
	src/worker/worker_status.o \
	src/worker/session_file.o \
	src/worker/secure.o \
	src/worker/credentials.o \
	src/worker/recipe.o \
	src/worker/batch.o
OBJS_RECIPES = \
	src/worker/recipes/protocol.o \
	src/worker/recipes/lock_held.o \
	src/worker/recipes/lock_explicit.o \
	src/worker/recipes/lock_semaphore.o \
	src/worker/recipes/explicit_index.o \
	src/worker/recipes/listing.o \
	src/worker/recipes/admin.o \
	src/worker/recipes/sweep.o \
	src/worker/recipes/orphan.o \
	src/worker/recipes/root.o \
	src/worker/recipes/deadlock_publish.o \
	src/worker/recipes/election.o \
	src/worker/recipes/election_query.o \
	src/worker/recipes/queue.o \
	src/worker/recipes/queue_write.o \
	src/worker/recipes/queue_release.o \
	src/worker/recipes/queue_pending.o \
	src/worker/recipes/queue_wait.o \
	src/worker/recipes/queue_util.o
OBJS_BACKEND = \
	src/backend/backend.o \
	src/backend/acquire.o \
	src/backend/acquire_batch.o \
	src/backend/wait.o \
	src/backend/local_locks.o \
	src/backend/request.o \
	src/backend/holder.o \
	src/backend/fence.o \
	src/backend/guard.o \
	src/backend/leader.o \
	src/backend/deadlock.o \
	src/backend/deadlock_read.o \
	src/backend/deadlock_graph.o \
	src/backend/queue.o \
	src/backend/queue_put.o
OBJS_FUNCTIONS = \
	src/functions/functions.o \
	src/functions/status.o \
	src/functions/advisory.o \
	src/functions/semaphore.o \
	src/functions/queue.o \
	src/functions/queue_items.o
OBJS = src/zklock.o $(OBJS_COMMON) $(OBJS_CLIENT) $(OBJS_WORKER) \
	$(OBJS_RECIPES) $(OBJS_BACKEND) $(OBJS_FUNCTIONS)

EXTENSION = zklock
DATA = zklock--1.0.sql zklock--1.0--1.1.sql zklock--1.1--1.2.sql zklock--1.2--1.3.sql \
	zklock--1.3--1.4.sql zklock--1.4--1.6.sql zklock--1.6--1.7.sql \
	zklock--1.7--1.8.sql zklock--1.8--1.9.sql
# the fresh install script of the default version: 1.0's script and every
# update script in turn, as CREATE EXTENSION ran them before 1.4 (one
# source for each object; test/t/upgrade/006 compares it with every update path)
ZKLOCK_SCRIPTS = zklock--1.0.sql zklock--1.0--1.1.sql zklock--1.1--1.2.sql \
	zklock--1.2--1.3.sql zklock--1.3--1.4.sql zklock--1.4--1.6.sql \
	zklock--1.6--1.7.sql zklock--1.7--1.8.sql zklock--1.8--1.9.sql
DATA_built = zklock--1.9.sql
PGFILEDESC = "zklock - ZooKeeper locks for PostgreSQL"

# ZooKeeper's C client.  By default Debian's libzookeeper-mt (shared, built
# without TLS and SASL: zklock.ssl and zklock.sasl_* then refuse to
# connect, and say why).  make ZK_CLIENT=<dir>: the client that
# scripts/build-zkclient.sh builds with OpenSSL and Cyrus SASL and caches
# (/var/cache/zklock/zkclient-<version>), linked in statically (its symbols
# not exported from zklock.so); the test build and the Debian package use
# it (doc/security.md: why).  zookeeper.h changes with HAVE_OPENSSL_H and
# HAVE_CYRUS_SASL_H, so they are defined as the client was built.
ifdef ZK_CLIENT
PG_CPPFLAGS_ZK = -I$(ZK_CLIENT)/include -DHAVE_OPENSSL_H -DHAVE_CYRUS_SASL_H -DZKLOCK_SECURE_CLIENT
SHLIB_LINK = $(ZK_CLIENT)/lib/libzookeeper_mt.a -Wl,--exclude-libs,libzookeeper_mt.a \
	-lssl -lcrypto -lsasl2 -lkrb5 -lm -lpthread
else
PG_CPPFLAGS_ZK =
SHLIB_LINK = -lzookeeper_mt -lpthread
endif
# every folder of src/ is on the include path, so that an #include names a
# header alone ("channel.h"), wherever it lives
ZKLOCK_SRC_DIRS = src src/common src/client src/worker src/worker/recipes \
	src/backend src/functions
PG_CPPFLAGS = $(PG_CPPFLAGS_ZK) $(addprefix -I$(srcdir)/,$(ZKLOCK_SRC_DIRS))
# the version in the module's magic block (PostgreSQL 18): zklock.control's
ZKLOCK_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(dir $(firstword $(MAKEFILE_LIST)))zklock.control)
PG_CPPFLAGS += -DZKLOCK_VERSION='"$(ZKLOCK_VERSION)"'
# (no -Werror here: a newer compiler's new warning must not break a user's
# build; test/run_tests.sh builds with PG_CFLAGS=-Werror)

# make FAILPOINTS=1: a test build with zklock.failpoints (src/common/failpoint.c)
ifdef FAILPOINTS
PG_CPPFLAGS += -DZKLOCK_FAILPOINTS
endif

# make installcheck: the SQL suite against the running server that PGHOST,
# PGPORT (and PGUSER) name, as for psql.  It must load zklock with the
# settings of test/installcheck.conf and reach a ZooKeeper; the precheck
# says what is missing, within seconds.  test/run_tests.sh starts such a
# server and a ZooKeeper, and runs this.
REGRESS = setup errors locks scopes listing fence naming hierarchy admin explicit limits advisory semaphore election stats queue
REGRESS_PREP = zklock-installcheck-precheck


# no JIT bitcode: nothing here is worth inlining, and clang need not be installed
override with_llvm = no

# the unit test's program (make zklock-unit, below)
EXTRA_CLEAN = test/unit/test_grant_rule test/unit/test_nodedata \
	test/unit/test_queue_name

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# (after PGXS, so that it is not the default goal)
zklock-installcheck-precheck:
	@bash $(srcdir)/test/installcheck_precheck.sh '$(bindir)'
.PHONY: zklock-installcheck-precheck

# (each script's "\echo ... \quit" line is dropped by CREATE EXTENSION)
zklock--1.9.sql: $(ZKLOCK_SCRIPTS)
	{ echo '/* zklock--1.9.sql: made by make from $(ZKLOCK_SCRIPTS); do not edit */'; \
	  for f in $^; do echo; echo "/* ---- $$f */"; cat $$f; done; } > $@

# every object depends on every header (PGXS tracks no dependencies)
ZKLOCK_HEADERS = $(wildcard $(addsuffix /*.h,$(ZKLOCK_SRC_DIRS)))
$(OBJS): $(ZKLOCK_HEADERS)

# make zklock-unit: the unit tests of the grant rule, of the node data
# codec and of queue entry names (test/unit/), standalone programs with
# src/common/grant_rule.c, src/common/nodedata.c or src/common/queue_name.c
# compiled in, built with the extension's compiler flags
# (and PG_CFLAGS); they print TAP.
test/unit/test_grant_rule: test/unit/test_grant_rule.c src/common/grant_rule.c src/common/grant_rule.h src/common/zklock.h src/common/compat.h
	$(CC) $(CFLAGS) $(CPPFLAGS) -o $@ $(srcdir)/test/unit/test_grant_rule.c $(srcdir)/src/common/grant_rule.c

test/unit/test_nodedata: test/unit/test_nodedata.c src/common/nodedata.c src/common/nodedata.h src/common/grant_rule.c src/common/grant_rule.h src/common/zklock.h src/common/compat.h
	$(CC) $(CFLAGS) $(CPPFLAGS) -o $@ $(srcdir)/test/unit/test_nodedata.c $(srcdir)/src/common/nodedata.c $(srcdir)/src/common/grant_rule.c

test/unit/test_queue_name: test/unit/test_queue_name.c src/common/queue_name.c src/common/queue_name.h src/common/queue_common.h src/common/zklock.h src/common/compat.h
	$(CC) $(CFLAGS) $(CPPFLAGS) -o $@ $(srcdir)/test/unit/test_queue_name.c $(srcdir)/src/common/queue_name.c

zklock-unit: test/unit/test_grant_rule test/unit/test_nodedata test/unit/test_queue_name
	rc=0; ./test/unit/test_grant_rule || rc=1; ./test/unit/test_nodedata || rc=1; \
	./test/unit/test_queue_name || rc=1; exit $$rc
.PHONY: zklock-unit
