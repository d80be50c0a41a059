/*-------------------------------------------------------------------------
 *
 * credentials.h
 *		The worker's digest credentials and the rule for a file holding a
 *		secret (credentials.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_CREDENTIALS_H
#define ZKLOCK_CREDENTIALS_H

struct stat;

extern const char *zklock_credentials(void);
extern const char *zklock_secret_file_problem(const struct stat *st,
											  const char **detail);

#endif							/* ZKLOCK_CREDENTIALS_H */
