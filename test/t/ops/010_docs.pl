# The documentation holds together (issue 16): README.md is the user's door
# and stays short, and the manual in doc/ is reachable from it with no broken
# link.  No servers: this reads files only.
#
#  - README.md is under 30,000 bytes;
#  - every relative link (and image) in README.md and doc/*.md names a file
#    or folder of the tree, and its #anchor, into a Markdown file, a heading
#    of that file (GitHub's slugs, with -1, -2 for repeated headings) or an
#    <a id/name> anchor in it;
#  - every doc/*.md page is linked from README.md;
#  - README.md names the two commands, `bash scripts/demo.sh` and
#    `bash test/run_tests.sh` (.ci/run runs exactly the second).
use strict;
use warnings;
use utf8;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Spec;
use Test::More;

my $root = abs_path(dirname(__FILE__) . '/../../..');

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<:encoding(UTF-8)', $path) or die "cannot read $path: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

# The text outside fenced code blocks, with inline code spans blanked, as
# lines: neither holds links or headings.
sub prose_lines
{
	my ($text) = @_;
	my @out;
	my $fence;
	for my $line (split /\n/, $text)
	{
		if ($line =~ /^\s*(```|~~~)/)
		{
			if (!defined $fence) { $fence = $1; }
			elsif ($1 eq $fence) { undef $fence; }
			push @out, '';
			next;
		}
		if (defined $fence) { push @out, ''; next; }
		$line =~ s/`[^`]*`/``/g;
		push @out, $line;
	}
	return @out;
}

# GitHub's heading slug: the heading's text (links reduced to their text,
# markup and HTML dropped), lower-cased, every character that is not a
# letter, digit, underscore, hyphen or space removed, spaces made hyphens.
sub slug
{
	my ($heading) = @_;
	my $h = $heading;
	$h =~ s/!?\[([^\]]*)\]\([^)]*\)/$1/g;
	$h =~ s/<[^>]*>//g;
	$h = lc $h;
	$h =~ s/[^\p{Word}\- ]//g;
	$h =~ s/ /-/g;
	return $h;
}

my %anchors_cache;

sub anchors_of
{
	my ($path) = @_;
	return $anchors_cache{$path} if $anchors_cache{$path};
	my (%anchors, %seen);
	my $text = slurp($path);
	# headings from the text with code spans kept (they count in the slug)
	my $fence;
	for my $line (split /\n/, $text)
	{
		if ($line =~ /^\s*(```|~~~)/)
		{
			if (!defined $fence) { $fence = $1; }
			elsif ($1 eq $fence) { undef $fence; }
			next;
		}
		next if defined $fence;
		if ($line =~ /^#{1,6}\s+(.*?)\s*#*\s*$/)
		{
			my $s = slug($1);
			my $n = $seen{$s}++;
			$anchors{ $n ? "$s-$n" : $s } = 1;
		}
		$anchors{$1} = 1 while $line =~ /<a\s+(?:id|name)="([^"]+)"/g;
	}
	return $anchors_cache{$path} = \%anchors;
}

my @pages = sort glob("$root/doc/*.md");
ok(scalar(@pages) >= 9, 'doc/ holds the manual\'s pages (' . scalar(@pages) . ')');

my $readme = "$root/README.md";
ok(-f $readme, 'README.md exists');
my $size = -s $readme;
cmp_ok($size, '<', 30_000, "README.md is under 30,000 bytes ($size)");

my %linked_from_readme;
for my $file ($readme, @pages)
{
	my $rel = File::Spec->abs2rel($file, $root);
	my $dir = dirname($file);
	my @broken;
	my $links = 0;
	# the whole text at once: a link's text may run over a line end
	my $prose = join("\n", prose_lines(slurp($file)));
	while ($prose =~ /!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)
	{
		my $target = $1;
		my $lineno = 1 + (() = substr($prose, 0, $-[0]) =~ /\n/g);
		next if $target =~ /^[a-z][a-z0-9+.-]*:/i;    # http:, https:, mailto:
		$links++;
		my ($path, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
		my $dest = $path eq '' ? $file : abs_path("$dir/$path");
		if (!defined $dest || !-e $dest)
		{
			push @broken, "$rel:$lineno: $target (no such file)";
			next;
		}
		$linked_from_readme{$dest} = 1 if $file eq $readme;
		next unless defined $anchor && $anchor ne '';
		if ($dest =~ /\.md$/)
		{
			push @broken, "$rel:$lineno: $target (no such heading or anchor)"
			  unless anchors_of($dest)->{$anchor};
		}
		elsif ($anchor !~ /^L\d+(?:-L\d+)?$/)
		{
			push @broken, "$rel:$lineno: $target (an anchor into a file that has none)";
		}
	}
	ok(!@broken, "$rel: all $links relative links resolve")
	  or diag(join("\n", @broken));
}

for my $page (@pages)
{
	my $rel = File::Spec->abs2rel($page, $root);
	ok($linked_from_readme{ abs_path($page) }, "README.md links to $rel");
}

my $text = slurp($readme);
ok($text =~ /^bash scripts\/demo\.sh\b/m, 'README.md names `bash scripts/demo.sh`');
ok($text =~ /^bash test\/run_tests\.sh\b/m, 'README.md names `bash test/run_tests.sh`');

done_testing();
