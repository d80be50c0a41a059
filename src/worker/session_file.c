/*-------------------------------------------------------------------------
 *
 * session_file.c
 *		pg_stat_tmp/zklock.session: which ZooKeeper session this instance's
 *		worker holds, so that its next worker can close it after a crash,
 *		and who wrote the file, so that a copy of the data directory does
 *		not close the original's session.
 *
 * Only the worker uses this file (worker.c); it is the worker's own
 * memory and the file, nothing shared.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "session_file.h"
#include "zk_client.h"

#define SESSION_FILE		PG_STAT_TMP_DIR "/zklock.session"
#define SESSION_FILE_TMP	PG_STAT_TMP_DIR "/zklock.session.tmp"
#define SESSION_IDENTITY_MAX 1200	/* the writer's identity in the file */

/*
 * The session file: session id, password and who wrote it -- this boot of
 * this machine, this PID namespace (a container has its own), this data
 * directory and port (instance_identity) -- written atomically.  A copy of
 * the data directory started elsewhere (a storage snapshot, a cloned
 * machine, another container on the same machine: another boot, PID
 * namespace, directory or port) must not close the original's live
 * session, which its owner still trusts until its lease runs out.  Two
 * containers that share the host's PID namespace, the path and the port
 * are not told apart.
 */
static bool sf_identity_known = false;	/* the boot id and namespace could
										 * be read */

/* "pid:[inode]" of this process's PID namespace; false if unreadable */
static bool
sf_pid_namespace(char *buf, size_t len)
{
	ssize_t		n = readlink("/proc/self/ns/pid", buf, len - 1);

	if (n <= 0)
	{
		buf[0] = '\0';
		return false;
	}
	buf[n] = '\0';
	return true;
}

static const char *
sf_instance_identity(void)
{
	static char *identity = NULL;

	if (identity == NULL)
	{
		char		boot_id[64] = "";
		char		pidns[64] = "";
		FILE	   *f = AllocateFile("/proc/sys/kernel/random/boot_id", "r");

		if (f != NULL)
		{
			if (fgets(boot_id, sizeof(boot_id), f) == NULL)
				boot_id[0] = '\0';
			FreeFile(f);
		}
		boot_id[strcspn(boot_id, "\n")] = '\0';
		sf_identity_known = boot_id[0] != '\0' && sf_pid_namespace(pidns, sizeof(pidns));
		identity = MemoryContextStrdup(TopMemoryContext,
									   psprintf("boot %s, %s, %s, port %d",
												boot_id, pidns, DataDir,
												PostPortNumber));
		if (strlen(identity) > SESSION_IDENTITY_MAX)
			identity[SESSION_IDENTITY_MAX] = '\0';
	}
	return identity;
}

void
zklock_session_file_save(void)
{
	char		buf[8 + 16 + SESSION_IDENTITY_MAX];
	int64		id = zkc_session_id();
	const char *who = sf_instance_identity();
	int			len;
	int			fd;

	memcpy(buf, &id, sizeof(id));
	len = sizeof(id) + zkc_session_passwd(buf + sizeof(id), 16);
	memcpy(buf + len, who, strlen(who));
	len += strlen(who);
	fd = OpenTransientFile(SESSION_FILE_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, buf, len) != len || pg_fsync(fd) != 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("zklock: could not write \"%s\": %m", SESSION_FILE_TMP)));
		if (fd >= 0)
			CloseTransientFile(fd);
		return;
	}
	CloseTransientFile(fd);
	(void) durable_rename(SESSION_FILE_TMP, SESSION_FILE, WARNING);
}

/*
 * The session named by the session file, if this instance wrote it in
 * this boot (see instance_identity).  A file that names no writer
 * (zklock 1.1's) is not trusted either: its session times out.
 */
bool
zklock_session_file_load(int64 *id, char *passwd)
{
	char		buf[8 + 16 + SESSION_IDENTITY_MAX];
	int			fd = OpenTransientFile(SESSION_FILE, O_RDONLY | PG_BINARY);
	const char *who = sf_instance_identity();
	int			len;

	if (fd < 0)
		return false;
	len = read(fd, buf, sizeof(buf));
	CloseTransientFile(fd);
	if (len < 8 + 16)
		return false;
	memcpy(id, buf, sizeof(*id));
	memcpy(passwd, buf + 8, 16);
	if (!sf_identity_known)
	{
		ereport(LOG,
				(errmsg("zklock: not closing ZooKeeper session 0x%llx named in \"%s\": this machine's boot id or this process's PID namespace cannot be read, so the file's writer cannot be told from a copy",
						(unsigned long long) *id, SESSION_FILE)));
		(void) unlink(SESSION_FILE);
		return false;
	}
	if (len - (8 + 16) != (int) strlen(who) ||
		memcmp(buf + 8 + 16, who, strlen(who)) != 0)
	{
		ereport(LOG,
				(errmsg("zklock: not closing ZooKeeper session 0x%llx named in \"%s\": it was written by \"%.*s\", and this is \"%s\"",
						(unsigned long long) *id, SESSION_FILE,
						len - (8 + 16), buf + 8 + 16, who),
				 errdetail("A copy of another instance's data directory, or a file of an earlier boot or zklock version: that session is left to its owner, or to time out.")));
		(void) unlink(SESSION_FILE);
		return false;
	}
	return *id != 0;
}

/* The session is closed, or not ours to close: the file goes */
void
zklock_session_file_remove(void)
{
	(void) unlink(SESSION_FILE);
}
