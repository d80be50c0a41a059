/*-------------------------------------------------------------------------
 *
 * explicit_index.h
 *		The index of explicit locks: one persistent node per explicit lock
 *		request under <root>/zklock.explicit, so that the sweep lists it
 *		instead of the whole tree.  The format and the rules of order are
 *		in explicit_index.c; the sweep that reads it is sweep.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_EXPLICIT_INDEX_H
#define ZKLOCK_EXPLICIT_INDEX_H

#include "zklock.h"

/* The index node, under the root (a reserved name: resource.h) */
#define ZKLOCK_EXPLICIT_INDEX_NODE	"zklock.explicit"

/* Room for an entry's path: root, index, escaped resource, request name */
#define ZKLOCK_EXPLICIT_INDEX_MAX_PATH \
	(ZKLOCK_MAX_ROOT_LEN + sizeof(ZKLOCK_EXPLICIT_INDEX_NODE) + \
	 3 * ZKLOCK_MAX_RESOURCE_LEN + ZKLOCK_MAX_NODE_NAME_LEN + 4)

extern void zklock_explicit_index_dir(char *buf, size_t size);
extern bool zklock_explicit_index_path(char *buf, size_t size,
									   const char *parent,
									   const char *request);
extern bool zklock_explicit_index_parse(const char *name,
										char *parent, size_t psize,
										char *request, size_t rsize);
extern bool zklock_explicit_index_request_of(const char *node, char *buf,
											 size_t size);
extern bool zklock_explicit_index_forget(const char *node_path, int version,
										 uint64 tag);

#endif							/* ZKLOCK_EXPLICIT_INDEX_H */
