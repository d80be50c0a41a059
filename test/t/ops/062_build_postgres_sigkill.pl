
# scripts/build-postgres.sh killed with SIGKILL (issue 16, review 2).
# SIGKILL cannot be trapped: the OOM killer, `timeout -s KILL`, a CI job's
# hard limit.  The build (setsid, its own session) must not outlive the
# script by more than seconds, must not hold the per-major flock for the
# next run, and its build folder must not stay in the cache forever.
# Same stand-ins as 061 (apt-get, dpkg-query, a tarball whose make sleeps).
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

# --- the source tarball: a build whose make runs as long as BUILD_SLEEP ------
my $srcname = 'postgresql-18.0';
my $s = "$tmp/tarsrc/$srcname";
spew("$s/configure", <<'SH', 0755);
#!/bin/sh
for a in "$@"; do
	case $a in --prefix=*) echo "prefix = ${a#--prefix=}" > Makefile.global ;; esac
done
SH
spew("$s/Makefile",
	"include Makefile.global\n"
	  . "all:\n"
	  . "\techo \$\$\$\$ > $tmp/make.pid; sleep \$\${BUILD_SLEEP:-0}\n"
	  . "install:\n"
	  . "\tmkdir -p \$(DESTDIR)\$(prefix)/bin\n"
	  . "\tprintf '#!/bin/sh\\necho PostgreSQL 18.0\\n' > \$(DESTDIR)\$(prefix)/bin/pg_config\n"
	  . "\tchmod 755 \$(DESTDIR)\$(prefix)/bin/pg_config\n");
spew("$s/contrib/dblink/Makefile", "all:\n\t\@true\ninstall:\n\t\@true\n");
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


sub alive
{
	my ($pid) = @_;
	return $pid ne '' && kill(0, $pid);
}

# --- the script is killed with SIGKILL (OOM killer, a CI job's timeout) -------
# It cannot clean up itself; its build must not outlive it by more than a
# few seconds (a real one takes both cores for minutes), must not keep the
# next run waiting for it, and its build folder must not stay forever.
my $mpid = '';
{
	local %ENV = (%ENV, @env, BUILD_SLEEP => 120);
	# (output to files: the build's processes hold whatever it inherits,
	# and a pipe would keep finish() waiting for them)
	my $h = IPC::Run::start([ 'bash', $script, '18' ],
		'<', \undef, '>', "$tmp/killed.out", '2>', "$tmp/killed.err");
	my $deadline = time() + 30;
	while (time() < $deadline && !-s "$tmp/make.pid")
	{
		select(undef, undef, undef, 0.1);
	}
	ok(-s "$tmp/make.pid", 'the long build runs');
	$h->signal('KILL');
	eval { $h->finish; 1 };
	note('killed run, stderr: ' . (`cat $tmp/killed.err` // ''));
	open(my $fh, '<', "$tmp/make.pid") or die "make.pid: $!";
	$mpid = <$fh> // '';
	chomp $mpid;
	$deadline = time() + 15;
	select(undef, undef, undef, 0.2) while time() < $deadline && alive($mpid);
	ok(!alive($mpid),
		"SIGKILL of build-postgres.sh: its build's processes end within seconds (make's shell $mpid)");
	# (the old code leaves them running: end them here, not in 120 s)
	if (alive($mpid))
	{
		chomp(my $g = `ps -o pgid= -p $mpid`);
		$g =~ s/\s//g;
		kill('KILL', -$g) if $g =~ /^\d+$/ && $g > 1;
		select(undef, undef, undef, 0.5);
	}
}

# --- run again: it builds and installs, and nothing of the killed run stays --
{
	local %ENV = (%ENV, @env, BUILD_SLEEP => 0);
	my ($out, $err) = ('', '');
	my $t0 = time();
	my $ok = run([ 'bash', $script, '18' ], '<', \undef, '>', \$out, '2>', \$err);
	note("second run, stderr: $err");
	ok($ok && $out =~ m{\Q$cache/pg18\E}, 'run again, it builds the tree');
	cmp_ok(time() - $t0, '<=', 60, '... without waiting for the killed run\'s build');
	my @left = glob("$cache/.build-pg18.*");
	is(scalar(@left), 0, "... and the killed run's build folder is gone")
	  or diag("left: @left");
}

done_testing();
