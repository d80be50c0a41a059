# zklock: ZooKeeper locks for PostgreSQL (PGXS)

MODULE_big = zklock
OBJS = \
	src/zklock.o \
	src/shmem.o \
	src/resource.o \
	src/zk_client.o \
	src/protocol.o \
	src/worker.o \
	src/backend.o \
	src/functions.o \
	src/lease.o \
	src/root.o \
	src/failpoint.o

EXTENSION = zklock
DATA = zklock--1.0.sql zklock--1.0--1.1.sql
PGFILEDESC = "zklock - ZooKeeper locks for PostgreSQL"

SHLIB_LINK = -lzookeeper_mt -lpthread
PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS = -Werror

# make FAILPOINTS=1: a test build with zklock.failpoints (src/failpoint.c)
ifdef FAILPOINTS
PG_CPPFLAGS += -DZKLOCK_FAILPOINTS
endif

# pg_regress needs a running ZooKeeper; test/run_tests.sh starts one and
# writes test/regress.conf pointing at it.
REGRESS = setup errors locks scopes listing fence naming hierarchy admin explicit limits
REGRESS_OPTS = --temp-config=$(srcdir)/test/regress.conf --temp-instance=./tmp_check_regress

# no JIT bitcode: nothing here is worth inlining, and clang need not be installed
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every object depends on the shared headers (PGXS tracks no dependencies)
$(OBJS): src/zklock.h src/compat.h src/zk_client.h src/protocol.h src/lease.h src/failpoint.h
