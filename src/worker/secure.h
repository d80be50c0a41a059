/*-------------------------------------------------------------------------
 *
 * secure.h
 *		The worker's TLS and SASL settings for its session, and what
 *		zk_lock_status says of them (secure.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SECURE_H
#define ZKLOCK_SECURE_H

#include "zk_client.h"

extern const ZkcTls *zklock_tls_config(ZkcTls *tls, char *err, int errlen,
									   bool *failed);
extern const ZkcSasl *zklock_sasl_config(ZkcSasl *sasl, char *err, int errlen,
										 bool *failed);
extern char *zklock_transport_signature(void);
extern void zklock_identity_publish(const ZkcTls *tls, const ZkcSasl *sasl,
									const char *digest);

#endif							/* ZKLOCK_SECURE_H */
