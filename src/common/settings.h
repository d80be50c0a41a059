/*-------------------------------------------------------------------------
 *
 * settings.h
 *		zklock's settings (GUCs), defined and checked in zklock.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SETTINGS_H
#define ZKLOCK_SETTINGS_H

extern char *zklock_hosts;
extern char *zklock_root;
extern int	zklock_session_timeout;
extern int	zklock_connect_timeout;
extern char *zklock_node_name;
extern char *zklock_auth;
extern char *zklock_auth_file;
extern char *zklock_node_naming;
extern int	zklock_max_locks_per_backend;
extern int	zklock_max_locks;
extern char *zklock_allowed_subtrees;
extern char *zklock_allowed_queues;	/* 1.9: queue names a role may use */
extern int	zklock_sweep_interval;
extern int	zklock_deadlock_timeout;
extern bool zklock_guard_by_listing;
extern int	zklock_lease_margin;
extern int	zklock_max_explicit_locks_per_role;
extern int	zklock_max_queue_items;
extern char *zklock_advisory_namespace;
extern char *zklock_elections;
extern bool zklock_track_stats;
extern int	zklock_stats_max;
extern bool zklock_ssl;
extern char *zklock_ssl_ca_file;
extern char *zklock_ssl_cert_file;
extern char *zklock_ssl_key_file;
extern bool zklock_ssl_verify_host;
extern char *zklock_sasl_mechanism;
extern char *zklock_sasl_user;
extern char *zklock_sasl_password_file;
extern char *zklock_sasl_service;
extern char *zklock_sasl_host;
extern char *zklock_sasl_keytab;
extern char *zklock_sasl_principal;

#endif							/* ZKLOCK_SETTINGS_H */
