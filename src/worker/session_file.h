/*-------------------------------------------------------------------------
 *
 * session_file.h
 *		The worker's session file (see session_file.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SESSION_FILE_H
#define ZKLOCK_SESSION_FILE_H

extern void zklock_session_file_save(void);
extern bool zklock_session_file_load(int64 *id, char *passwd);
extern void zklock_session_file_remove(void);

#endif							/* ZKLOCK_SESSION_FILE_H */
