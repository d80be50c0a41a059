/*-------------------------------------------------------------------------
 *
 * secure.h
 *		The worker's TLS settings for its session (secure.c).
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

#endif							/* ZKLOCK_SECURE_H */
