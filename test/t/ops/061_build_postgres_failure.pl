
# scripts/build-postgres.sh never caches a tree whose build failed
# (issue 16, review).  Its promise: "installed atomically: a build cut off
# leaves no half cache", and a cached tree is reused from then on without
# a look inside (only bin/pg_config and the .zklock-complete mark).
#
# The build here fails part-way: the main tree's `make` fails, its
# `make install` installs part of the tree (bin/pg_config among it) and
# then fails, and only the contrib module dblink builds and installs.  The
# script must then exit non-zero, say "build failed", and leave no
# <cache>/pg18; run again, it must not report that tree as cached.
#
# No network and no compiler: apt-get is replaced (PATH) by a stand-in that
# "downloads" a small source tarball made here, whose configure and
# Makefiles act out that failure, and dpkg-query by one that reports the
# build tools installed.  The rest is the script as it is (it reads the
# archive's address from /etc/apt, as on any Debian machine).  No servers.
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use File::Spec;
use File::Temp;
use IPC::Run qw(run);
use Test::More;

my $root = abs_path(dirname(__FILE__) . '/../../..');
my $script = "$root/scripts/build-postgres.sh";
# (absolute: the script builds $work/root$dest, which needs an absolute
# cache path; PostgreSQL's TAP tempdir may be relative)
my $tmp = File::Temp::tempdir('buildpg_XXXX', TMPDIR => 1, CLEANUP => 1);

sub spew
{
	my ($path, $text, $mode) = @_;
	make_path(dirname($path));
	open(my $fh, '>', $path) or die "cannot write $path: $!";
	print $fh $text;
	close $fh;
	chmod($mode, $path) if defined $mode;
	return;
}

# --- the source tarball: a build that fails part-way -----------------------
my $srcname = 'postgresql-18.0';
my $s = "$tmp/tarsrc/$srcname";
spew("$s/configure", <<'SH', 0755);
#!/bin/sh
# the stand-in's configure: records the prefix for the Makefiles
for a in "$@"; do
	case $a in --prefix=*) echo "prefix = ${a#--prefix=}" > Makefile.global ;; esac
done
SH
spew("$s/Makefile",
	"include Makefile.global\n"
	  . "all:\n"
	  . "\t\@echo 'stand-in: a compile error in the main tree' >&2; exit 1\n"
	  . "install:\n"
	  . "\tmkdir -p \$(DESTDIR)\$(prefix)/bin\n"
	  . "\tprintf '#!/bin/sh\\necho PostgreSQL 18.0\\n' > \$(DESTDIR)\$(prefix)/bin/pg_config\n"
	  . "\tchmod 755 \$(DESTDIR)\$(prefix)/bin/pg_config\n"
	  . "\t\@echo 'stand-in: make install stops at the part that did not build' >&2; exit 1\n");
spew("$s/contrib/dblink/Makefile",
	"include ../../Makefile.global\n"
	  . "all:\n"
	  . "\t\@true\n"
	  . "install:\n"
	  . "\tmkdir -p \$(DESTDIR)\$(prefix)/lib/postgresql\n"
	  . "\ttouch \$(DESTDIR)\$(prefix)/lib/postgresql/dblink.so\n");
my $tarball = "$tmp/postgresql-18_18.0.orig.tar.gz";
run([ 'tar', '-czf', $tarball, '-C', "$tmp/tarsrc", $srcname ])
  or die "tar failed";

# --- apt-get's stand-in: update succeeds, source "downloads" the tarball ----
spew("$tmp/bin/apt-get", <<"SH", 0755);
#!/bin/sh
for a in "\$@"; do
	case \$a in
	update) exit 0 ;;
	source) cp '$tarball' . && exit 0 ;;
	esac
done
echo "apt-get stand-in: unexpected call: \$*" >&2
exit 1
SH

# dpkg-query's stand-in: every build tool the script checks is installed
spew("$tmp/bin/dpkg-query", "#!/bin/sh\necho 'install ok installed'\n", 0755);

my $cache = "$tmp/cache";
my @env = (
	PATH => "$tmp/bin:$ENV{PATH}",
	ZKLOCK_PG_CACHE => $cache);

sub build
{
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, @env);
	my $ok = run([ 'bash', $script, '18' ], '<', \undef, '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

my ($ok, $out, $err) = build();
note("stdout: $out");
note("stderr: $err");
ok(!$ok, 'a build that fails part-way makes build-postgres.sh fail');
like($err, qr/build failed/, '... and say the build failed');
ok(!-e "$cache/pg18",
	'... and leaves no tree in the cache (not even one with bin/pg_config and the complete mark)');
ok(!-e "$cache/pg18/.zklock-complete", '... nothing marked complete');

# run again: a half tree must not be taken for the cached one
($ok, $out, $err) = build();
note("second run, stdout: $out");
note("second run, stderr: $err");
ok(!$ok && $out !~ m{\Q$cache/pg18\E},
	'run again, it does not report a cached tree');

# --- a build cut off by a signal: nothing of it is left ----------------------
# (the main tree's make now runs a long time; the script gets SIGTERM)
spew("$s/Makefile",
	"include Makefile.global\n"
	  . "all:\n"
	  . "\techo \$\$\$\$ > $tmp/make.pid; sleep 120\n"
	  . "install:\n"
	  . "\t\@true\n");
run([ 'tar', '-czf', $tarball, '-C', "$tmp/tarsrc", $srcname ])
  or die "tar failed";
{
	local %ENV = (%ENV, @env);
	my ($kout, $kerr) = ('', '');
	my $h = IPC::Run::start([ 'bash', $script, '18' ], '<', \undef, '>', \$kout, '2>', \$kerr);
	my $deadline = time() + 30;
	while (time() < $deadline && !-s "$tmp/make.pid")
	{
		$h->pump_nb;
		select(undef, undef, undef, 0.1);
	}
	ok(-s "$tmp/make.pid", 'the long build runs');
	$h->signal('TERM');
	my $t0 = time();
	eval { $h->finish; 1 };
	note("killed run, stderr: $kerr");
	cmp_ok(time() - $t0, '<=', 15, 'cut off with SIGTERM, build-postgres.sh ends within seconds');
	open(my $fh, '<', "$tmp/make.pid");
	my $mpid = <$fh> // '';
	chomp $mpid;
	ok($mpid ne '' && !kill(0, $mpid), "the build's processes are gone (make's shell $mpid)");
	my @left = glob("$cache/.build-pg18.*");
	is(scalar(@left), 0, 'its build folder is removed') or diag("left: @left");
	ok(!-e "$cache/pg18", 'and nothing is in the cache');
}

done_testing();
