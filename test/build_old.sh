#!/usr/bin/env bash
#
# build_old.sh SRC REV DEST -- zklock as of git revision REV of the clone
# SRC, built and installed into a private copy of PostgreSQL 15 under DEST
# (its bin directory is DEST/usr/lib/postgresql/15/bin); prints the
# installation's path (for PostgreSQL::Test::Cluster's install_path).
# test/t/upgrade/034_rolling_upgrade.pl runs an instance of it beside one of the
# tree's own library; test/run_tests.sh builds it, as root, before the
# suite (the suite itself runs from a copy without .git).
#
set -euo pipefail
src=$1
rev=$2
dest=$3
pgdir=$(dirname "$(pg_config --bindir)")	# /usr/lib/postgresql/15
share=$(pg_config --sharedir)				# /usr/share/postgresql/15

mkdir -p "$dest/src" "$dest/usr/lib/postgresql" "$dest/usr/share/postgresql"
git -C "$src" archive "$rev" | tar -x -C "$dest/src"
cp -a "$pgdir" "$dest/usr/lib/postgresql/"
cp -a "$share" "$dest/usr/share/postgresql/"
ln -sfn /usr/include "$dest/usr/include"
bin="$dest/usr/lib/postgresql/$(basename "$pgdir")/bin"
# whatever zklock the system's PostgreSQL has (the tree's own) goes
rm -f "$dest/usr/lib/postgresql/$(basename "$pgdir")/lib/zklock.so" \
	"$dest/usr/share/postgresql/$(basename "$share")/extension"/zklock*
make -C "$dest/src" -s PG_CONFIG="$bin/pg_config" >/dev/null
make -C "$dest/src" -s install PG_CONFIG="$bin/pg_config" >/dev/null
chmod -R a+rX "$dest"
dirname "$bin"
