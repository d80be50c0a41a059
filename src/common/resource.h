/*-------------------------------------------------------------------------
 *
 * resource.h
 *		Resource names, lock modes and the names zklock gives its own
 *		lock nodes (see resource.c; reading any node's name is
 *		grant_rule.h's zklock_parse_node_name).
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RESOURCE_H
#define ZKLOCK_RESOURCE_H

#include "zklock.h"

/*
 * Names zklock keeps for itself directly under the root, out of the
 * resource namespace: a resource whose first segment begins with one of
 * these is refused (22023).  "zklock." is every internal node of 1.3 on
 * (root.c's zklock.anchor and zklock.probe-, the sweep's clock node);
 * "zklock-clock-" is the clock node of the versions before.
 */
#define ZKLOCK_RESERVED_PREFIX		"zklock."
#define ZKLOCK_OLD_CLOCK_PREFIX		"zklock-clock-"
#define ZKLOCK_CLOCK_PREFIX			ZKLOCK_RESERVED_PREFIX "clock-"

/*
 * The advisory keys' subtree (advisory.c): reserved, so users cannot lock
 * its resources by name, but may list them and superusers free them
 * (zklock_check_named_resource)
 */
#define ZKLOCK_ADVISORY_PREFIX		"zklock.advisory/"

extern void zklock_check_resource(const char *resource);
extern void zklock_check_named_resource(const char *resource);
extern int	zklock_resource_depth(const char *resource);
extern const char *zklock_resource_problem(const char *resource, int *sqlstate);
extern bool zklock_check_allowed_subtrees(const char *setting,
										  const char **why, bool strict);
extern bool zklock_allowed_by(const char *setting, const char *name);
extern void zklock_check_allowed(const char *resource);
extern ZkLockMode zklock_parse_mode(const char *mode);
extern const char *zklock_mode_name(ZkLockMode mode);
extern void zklock_format_node_prefix(char *buf, size_t buflen,
									  uint32 incarnation, int idx,
									  uint32 generation, bool persistent);
extern bool zklock_node_has_prefix(const char *name, const char *prefix);
extern void zklock_format_node_request(char *buf, size_t buflen,
									   const char *prefix, ZkLockMode mode,
									   ZkNamingStyle style);
extern void zklock_format_semaphore_request(char *buf, size_t buflen,
											const char *prefix,
											int max_holders,
											ZkNamingStyle style);
extern char *zklock_check_node_naming(const char *setting);
extern ZkNamingStyle zklock_naming_style(const char *resource);

/* the name this instance gives itself in node data */
extern const char *zklock_instance_name(void);

#endif							/* ZKLOCK_RESOURCE_H */
