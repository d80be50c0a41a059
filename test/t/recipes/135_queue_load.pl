
# The distributed queue under load (issue 31): 4 producers and 4 consumers
# on two instances (2 of each per instance), ZKLOCK_QUEUE_ITEMS items
# (default 2,000) of three priorities mixed.  Each consumer records what it
# takes (the item's id, its payload, its priority, its own order) in a
# table, in the consuming transaction: the pattern doc/sql.md gives for
# deduplication.  Then, across both instances' tables:
#  - every item put is taken exactly once: none lost, none duplicated
#    (printed: taken once, lost, duplicated, and the time)
#  - FIFO within a priority as seen by each single consumer: the ids one
#    consumer takes within one priority rise (an id is Kazoo's entry name,
#    entry-PPP-<sequence>, the sequence its arrival), and each producer's
#    items of one priority reach a consumer in the order they were put
#  - the queue is empty in ZooKeeper at the end
# The producers on node1 use the transactional zk_queue_put (one item per
# transaction), those on node2 zk_queue_put_now.  Producers and consumers
# are procedures (COMMIT in a loop), one CALL per session.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(time);

my $items = $ENV{ZKLOCK_QUEUE_ITEMS} || 2000;
my $per_producer = int($items / 4);
$items = 4 * $per_producer;

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

foreach my $node ($node1, $node2)
{
	$node->safe_psql('postgres', <<'EOS');
CREATE TABLE taken (id text NOT NULL, item text NOT NULL, priority int NOT NULL,
                    consumer text NOT NULL, n int NOT NULL,
                    t float8 NOT NULL DEFAULT extract(epoch FROM clock_timestamp()));
-- the take that ended each consumer: it waited from t_begin to t_end
CREATE TABLE idle (consumer text, t_call float8, t_first float8,
                   t_begin float8, t_end float8, t_done float8);
CREATE PROCEDURE produce(who text, nitems int, transactional bool)
LANGUAGE plpgsql AS $$
DECLARE
  prio int;
BEGIN
  FOR i IN 1 .. nitems LOOP
    prio := (ARRAY[10, 100, 500])[1 + i % 3];
    IF transactional THEN
      PERFORM zk_queue_put('load', format('%s-%s', who, i), prio);
    ELSE
      PERFORM zk_queue_put_now('load', format('%s-%s', who, i), prio);
    END IF;
    COMMIT;
  END LOOP;
END $$;
CREATE PROCEDURE consume(who text, idle interval)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n int := 0;
  t0 float8;
  t_call float8 := extract(epoch FROM clock_timestamp());
  t_first float8;
BEGIN
  LOOP
    t0 := extract(epoch FROM clock_timestamp());
    t_first := coalesce(t_first, t0);
    SELECT * INTO r FROM zk_queue_take('load', idle);
    IF r.id IS NULL THEN
      INSERT INTO idle VALUES (who, t_call, t_first, t0,
                               extract(epoch FROM clock_timestamp()));
      EXIT;
    END IF;
    n := n + 1;
    INSERT INTO taken (id, item, priority, consumer, n)
      VALUES (r.id, convert_from(r.item, 'UTF8'), r.priority, who, n);
    COMMIT;
  END LOOP;
  COMMIT;
  -- when that last transaction's COMMIT returned
  UPDATE idle SET t_done = extract(epoch FROM clock_timestamp()) WHERE consumer = who;
  COMMIT;
END $$;
EOS
}

my (@producers, @consumers);
foreach my $i (1 .. 2)
{
	push @consumers, zk_session($node1, "c1$i"), zk_session($node2, "c2$i");
	push @producers, [ zk_session($node1, "p1$i"), 'true' ],
	  [ zk_session($node2, "p2$i"), 'false' ];
}

# consumers first (they wait on the empty queue), then the producers
my $t0 = time();
$_->send(sprintf(q{CALL consume('%s', '10 s')}, $_->name)) foreach @consumers;
foreach my $p (@producers)
{
	my ($s, $tx) = @$p;
	$s->send(sprintf(q{CALL produce('%s', %d, %s)}, $s->name, $per_producer, $tx));
}
my $produced = 1;
foreach my $p (@producers)
{
	my $r = $p->[0]->wait(300);
	$produced = 0 unless $r && $r->{sqlstate} eq '00000';
	diag($p->[0]->name . ': ' . ($r ? "$r->{sqlstate} $r->{err}" : 'timed out'))
	  unless $r && $r->{sqlstate} eq '00000';
}
my $t_put = time() - $t0;
ok($produced, "4 producers put $items items");
my $consumed = 1;
foreach my $c (@consumers)
{
	my $r = $c->wait(300);
	$consumed = 0 unless $r && $r->{sqlstate} eq '00000';
	diag($c->name . ': ' . ($r ? "$r->{sqlstate} $r->{err}" : 'timed out'))
	  unless $r && $r->{sqlstate} eq '00000';
}
# the consumers end 10 s after the last item (their idle timeout)
my $elapsed = time() - $t0 - 10;
ok($consumed, '4 consumers ended');

# every take, from both instances
my @rows;
foreach my $node ($node1, $node2)
{
	push @rows, map { [ split /\|/ ] } split /\n/,
	  $node->safe_psql('postgres',
		'SELECT id, item, priority, consumer, n, t FROM taken ORDER BY consumer, n');
}
# each consumer's last take (the one that found nothing for 10 s): once
# the producers are done every item is in the queue, so a take that gives
# up after that while items are still untaken (more than the 3 the other
# consumers may hold) slept through items it could take
my @idle;
foreach my $node ($node1, $node2)
{
	push @idle, map { [ split /\|/ ] } split /\n/,
	  $node->safe_psql('postgres',
		'SELECT consumer, t_begin, t_end, t_call, t_first, t_done FROM idle');
}
my $t_put_end = $t0 + $t_put;
my @slept;
foreach my $w (sort { $a->[0] cmp $b->[0] } @idle)
{
	my ($who, $b, $e, $call, $first, $done) = @$w;
	my $mine = grep { $_->[3] eq $who } @rows;
	my $before = grep { $_->[5] < $e } @rows;
	my $line = sprintf('%s: %d items taken; CALL at +%.1f s, first zk_queue_take '
		  . 'at +%.1f s, the last from +%.1f s to +%.1f s (NULL), when %d of %d '
		  . 'items were taken (all put at +%.1f s); its COMMIT returned at +%.1f s',
		$who, $mine, (map { $_ - $t0 } $call, $first, $b, $e), $before, $items,
		$t_put, $done - $t0);
	diag($line);
	push @slept, $line if $e > $t_put_end && $before < $items - 3;
}
is(scalar(@slept), 0,
	'no waiting taker gives up while items are in the queue')
  or diag(join("\n", @slept));
my (%count, %id_of, $id_changed);
foreach my $r (@rows)
{
	my ($id, $item) = @$r;
	$count{$item}++;
	$id_changed++ if defined $id_of{$item} && $id_of{$item} ne $id;
	$id_of{$item} = $id;
}
my @expected = map { my $p = $_->[0]->name; map { "$p-$_" } 1 .. $per_producer } @producers;
my $once = grep { ($count{$_} // 0) == 1 } @expected;
my $lost = grep { !$count{$_} } @expected;
my $dup = grep { ($count{$_} // 0) > 1 } @expected;
my %expected = map { $_ => 1 } @expected;
my $foreign = grep { !$expected{$_} } keys %count;
diag(sprintf('%d items, 4 producers, 4 consumers on two instances: '
	  . 'taken once %d, lost %d, duplicated %d; puts done in %.1f s, '
	  . 'all taken in %.1f s (%.0f items/s)',
	$items, $once, $lost, $dup, $t_put, $elapsed, $items / ($elapsed || 1)));
is($lost, 0, 'no item lost');
is($dup, 0, 'no item duplicated');
is($once, $items, 'every item taken exactly once');
is($foreign, 0, 'nothing taken that was not put');
is($id_changed // 0, 0, 'an item has one id');

# FIFO within a priority, per consumer: its ids of one priority rise, and
# each producer's items of one priority reach it in the producer's order
my %per;
foreach my $r (@rows)
{
	my ($id, $item, $prio, $who) = @$r;
	push @{ $per{$who}{$prio} }, [ $id, $item ];
}
my @out_of_order;
foreach my $who (sort keys %per)
{
	foreach my $prio (sort keys %{ $per{$who} })
	{
		my ($last_id, %last_of) = ('');
		foreach my $t (@{ $per{$who}{$prio} })
		{
			my ($id, $item) = @$t;
			my ($prod, $i) = $item =~ /^(.*)-(\d+)$/;
			push @out_of_order, "$who: $id after $last_id (priority $prio)"
			  if $id le $last_id;
			push @out_of_order, "$who: $item after $prod-$last_of{$prod}"
			  if defined $last_of{$prod} && $i < $last_of{$prod};
			$last_id = $id;
			$last_of{$prod} = $i;
		}
	}
}
is(scalar(@out_of_order), 0, 'FIFO within a priority as each consumer sees it')
  or diag(join("\n", @out_of_order[ 0 .. ($#out_of_order < 9 ? $#out_of_order : 9) ]));
is(scalar(keys %per), 4, 'all four consumers took items');

is($node1->safe_psql('postgres', q{SELECT zk_queue_length('load')}), 0,
	'the queue is empty');
my $root = zk_root();
is(scalar(grep { m{/load/(entries|taken|pending)/} }
		zk_list_znodes("$root/zklock.queues")), 0,
	'no entry, hold or pending put left in ZooKeeper');

$_->quit foreach @consumers, map { $_->[0] } @producers;
zk_done_check();
done_testing();
