/*-------------------------------------------------------------------------
 *
 * credentials.c
 *		The worker's credentials for ZooKeeper's digest scheme, read from
 *		zklock.auth_file (or the deprecated zklock.auth) once per worker
 *		process, and the rule for a file holding a secret (zklock.auth_file,
 *		zklock.ssl_key_file, zklock.sasl_password_file, zklock.sasl_keytab),
 *		as PostgreSQL's for its ssl_key_file.
 *
 * Moved out of zklock.c (issue 29's limit): the settings stay defined
 * there, and only the worker calls these (worker.c when it starts a
 * session, recipes/root.c, secure.c).  Runs in the worker's process, on
 * its main thread; the credentials are kept in TopMemoryContext, in
 * statics of this process: no shared state, no lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/fd.h"
#include "utils/memutils.h"

#include "settings.h"
#include "credentials.h"

#define AUTH_FILE_MAX	1024

/*
 * Why a file holding a secret (zklock.auth_file, zklock.ssl_key_file) may
 * not be used, or NULL: as PostgreSQL demands of ssl_key_file, a regular
 * file owned by the server's OS user with no group or world access, or
 * owned by root with at most group read access.  *detail gets the rule.
 */
const char *
zklock_secret_file_problem(const struct stat *st, const char **detail)
{
	*detail = NULL;
	if (!S_ISREG(st->st_mode))
		return "is not a regular file";
	if (st->st_uid != geteuid() && st->st_uid != 0)
		return "must be owned by the database user or root";
	if ((st->st_uid == geteuid() && (st->st_mode & (S_IRWXG | S_IRWXO))) ||
		(st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
	{
		*detail = "File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.";
		return "has group or world access";
	}
	return NULL;
}

/*
 * The contents of zklock.auth_file, one line.  As PostgreSQL demands of
 * ssl_key_file: a regular file owned by the server's OS user with no group
 * or world access, or owned by root with at most group read access.
 */
static char *
read_auth_file(const char *path)
{
	char		buf[AUTH_FILE_MAX + 2];
	struct stat st;
	int			fd;
	ssize_t		len;
	int			save_errno;
	char	   *result;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("zklock: could not open zklock.auth_file \"%s\": %m",
						path)));
	if (fstat(fd, &st) != 0)
	{
		save_errno = errno;
		CloseTransientFile(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("zklock: could not stat zklock.auth_file \"%s\": %m",
						path)));
	}
	if (!S_ISREG(st.st_mode) ||
		(st.st_uid != geteuid() && st.st_uid != 0) ||
		(st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO))) ||
		(st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
	{
		CloseTransientFile(fd);
		if (!S_ISREG(st.st_mode))
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("zklock: zklock.auth_file \"%s\" is not a regular file",
							path)));
		if (st.st_uid != geteuid() && st.st_uid != 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("zklock: zklock.auth_file \"%s\" must be owned by the database user or root",
							path)));
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("zklock: zklock.auth_file \"%s\" has group or world access",
						path),
				 errdetail("File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.")));
	}
	len = read(fd, buf, sizeof(buf) - 1);
	save_errno = errno;
	CloseTransientFile(fd);
	if (len < 0)
	{
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("zklock: could not read zklock.auth_file \"%s\": %m",
						path)));
	}
	if (len > AUTH_FILE_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("zklock: zklock.auth_file \"%s\" is longer than %d bytes",
						path, AUTH_FILE_MAX)));
	buf[len] = '\0';
	/* one line: its line break is not part of the password */
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	if (strlen(buf) != (size_t) len)
		buf[0] = '\0';			/* a NUL inside: malformed, said below */
	result = MemoryContextStrdup(TopMemoryContext, buf);
	explicit_bzero(buf, sizeof(buf));
	return result;
}

/*
 * The credentials for ZooKeeper's digest scheme, "user:password", or NULL
 * for none.  The worker asks each time it starts a session; they are read
 * once per worker process, from zklock.auth_file or (deprecated)
 * zklock.auth.  A value that cannot be used raises an ERROR, which ends the
 * worker (it is started again a second later, and reads them again):
 * connecting without the credentials asked for would create lock nodes
 * that anyone may delete.  No message quotes the value.
 */
const char *
zklock_credentials(void)
{
	static bool known = false;
	static char *credentials = NULL;
	bool		from_file = (zklock_auth_file != NULL && zklock_auth_file[0] != '\0');
	bool		from_setting = (zklock_auth != NULL && zklock_auth[0] != '\0');
	const char *what = from_file ? "the file named by zklock.auth_file" : "zklock.auth";
	char	   *value;
	char	   *colon;

	if (known)
		return credentials;
	if (from_file && from_setting)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock: zklock.auth and zklock.auth_file are both set"),
				 errhint("Remove zklock.auth, which is deprecated.")));
	if (!from_file && !from_setting)
	{
		known = true;
		return NULL;
	}
	if (from_file)
		value = read_auth_file(zklock_auth_file);
	else
	{
		value = MemoryContextStrdup(TopMemoryContext, zklock_auth);
		ereport(WARNING,
				(errmsg("zklock: zklock.auth is deprecated"),
				 errdetail("Its value is in a configuration file, which pg_file_settings shows to the roles allowed to read that view."),
				 errhint("Put \"digest:user:password\" in a file that only the server's OS user can read, and name it in zklock.auth_file.")));
	}

	if (strncmp(value, "sasl:", 5) == 0 || strncmp(value, "x509:", 5) == 0 ||
		strncmp(value, "tls:", 4) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock: %s asks for an authentication scheme zklock does not support",
						what),
				 errdetail("zklock.auth and zklock.auth_file hold digest credentials only: TLS (and its x509 identity) is zklock.ssl, SASL is zklock.sasl_mechanism.")));
	colon = strncmp(value, "digest:", 7) == 0 ? strchr(value + 7, ':') : NULL;
	if (colon == NULL || colon == value + 7 ||
		strpbrk(value, "\n\r") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock: %s does not hold \"digest:user:password\"",
						what),
				 errdetail("The value is not shown: it holds a password.")));
	credentials = value + 7;
	known = true;
	return credentials;
}
