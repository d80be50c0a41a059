# zklock: ZooKeeper locks for PostgreSQL (PGXS)

MODULE_big = zklock
OBJS = \
	src/zklock.o \
	src/deadlock.o \
	src/deadlock_publish.o \
	src/deadlock_read.o \
	src/shmem.o \
	src/resource.o \
	src/grant_rule.o \
	src/nodedata.o \
	src/zk_client.o \
	src/zk_events.o \
	src/batch.o \
	src/recipe.o \
	src/protocol.o \
	src/lock_explicit.o \
	src/lock_held.o \
	src/lock_semaphore.o \
	src/listing.o \
	src/admin.o \
	src/sweep.o \
	src/explicit_index.o \
	src/orphan.o \
	src/channel.o \
	src/worker.o \
	src/worker_status.o \
	src/worker_signals.o \
	src/session_file.o \
	src/backend.o \
	src/local_locks.o \
	src/wait.o \
	src/wait_events.o \
	src/acquire.o \
	src/guard.o \
	src/fence.o \
	src/request.o \
	src/functions.o \
	src/status.o \
	src/advisory.o \
	src/lease.o \
	src/root.o \
	src/failpoint.o \
	src/semaphore.o \
	src/election.o \
	src/election_common.o \
	src/election_query.o \
	src/leader.o \
	src/stats.o

EXTENSION = zklock
DATA = zklock--1.0.sql zklock--1.0--1.1.sql zklock--1.1--1.2.sql zklock--1.2--1.3.sql \
	zklock--1.3--1.4.sql zklock--1.4--1.6.sql zklock--1.6--1.7.sql
# the fresh install script of the default version: 1.0's script and every
# update script in turn, as CREATE EXTENSION ran them before 1.4 (one
# source for each object; test/t/006 compares it with every update path)
ZKLOCK_SCRIPTS = zklock--1.0.sql zklock--1.0--1.1.sql zklock--1.1--1.2.sql \
	zklock--1.2--1.3.sql zklock--1.3--1.4.sql zklock--1.4--1.6.sql \
	zklock--1.6--1.7.sql
DATA_built = zklock--1.7.sql
PGFILEDESC = "zklock - ZooKeeper locks for PostgreSQL"

SHLIB_LINK = -lzookeeper_mt -lpthread
PG_CPPFLAGS = -I$(srcdir)/src
# the version in the module's magic block (PostgreSQL 18): zklock.control's
ZKLOCK_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(dir $(firstword $(MAKEFILE_LIST)))zklock.control)
PG_CPPFLAGS += -DZKLOCK_VERSION='"$(ZKLOCK_VERSION)"'
# (no -Werror here: a newer compiler's new warning must not break a user's
# build; test/run_tests.sh builds with PG_CFLAGS=-Werror)

# make FAILPOINTS=1: a test build with zklock.failpoints (src/failpoint.c)
ifdef FAILPOINTS
PG_CPPFLAGS += -DZKLOCK_FAILPOINTS
endif

# make installcheck: the SQL suite against the running server that PGHOST,
# PGPORT (and PGUSER) name, as for psql.  It must load zklock with the
# settings of test/installcheck.conf and reach a ZooKeeper; the precheck
# says what is missing, within seconds.  test/run_tests.sh starts such a
# server and a ZooKeeper, and runs this.
REGRESS = setup errors locks scopes listing fence naming hierarchy admin explicit limits advisory semaphore election stats
REGRESS_PREP = zklock-installcheck-precheck


# no JIT bitcode: nothing here is worth inlining, and clang need not be installed
override with_llvm = no

# the unit test's program (make zklock-unit, below)
EXTRA_CLEAN = test/unit/test_grant_rule test/unit/test_nodedata

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# (after PGXS, so that it is not the default goal)
zklock-installcheck-precheck:
	@bash $(srcdir)/test/installcheck_precheck.sh '$(bindir)'
.PHONY: zklock-installcheck-precheck

# (each script's "\echo ... \quit" line is dropped by CREATE EXTENSION)
zklock--1.7.sql: $(ZKLOCK_SCRIPTS)
	{ echo '/* zklock--1.7.sql: made by make from $(ZKLOCK_SCRIPTS); do not edit */'; \
	  for f in $^; do echo; echo "/* ---- $$f */"; cat $$f; done; } > $@

# every object depends on the shared headers (PGXS tracks no dependencies)
$(OBJS): src/zklock.h src/compat.h src/settings.h src/shmem.h src/channel.h \
	src/resource.h src/worker.h src/worker_status.h src/backend.h \
	src/backend_int.h src/zk_client.h src/zk_events.h src/recipe.h \
	src/lock_int.h src/lease.h src/batch.h \
	src/failpoint.h src/grant_rule.h src/nodedata.h src/session_file.h \
	src/wait_events.h src/functions.h src/election.h src/election_int.h \
	src/explicit_index.h src/stats.h

# make zklock-unit: the unit tests of the grant rule and of the node data
# codec (test/unit/), standalone programs with src/grant_rule.c and
# src/nodedata.c compiled in, built with the extension's compiler flags
# (and PG_CFLAGS); they print TAP.
test/unit/test_grant_rule: test/unit/test_grant_rule.c src/grant_rule.c src/grant_rule.h src/zklock.h src/compat.h
	$(CC) $(CFLAGS) $(CPPFLAGS) -o $@ $(srcdir)/test/unit/test_grant_rule.c $(srcdir)/src/grant_rule.c

test/unit/test_nodedata: test/unit/test_nodedata.c src/nodedata.c src/nodedata.h src/grant_rule.c src/grant_rule.h src/zklock.h src/compat.h
	$(CC) $(CFLAGS) $(CPPFLAGS) -o $@ $(srcdir)/test/unit/test_nodedata.c $(srcdir)/src/nodedata.c $(srcdir)/src/grant_rule.c

zklock-unit: test/unit/test_grant_rule test/unit/test_nodedata
	rc=0; ./test/unit/test_grant_rule || rc=1; ./test/unit/test_nodedata || rc=1; exit $$rc
.PHONY: zklock-unit
