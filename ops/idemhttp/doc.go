// Package idemhttp is net/http middleware that makes POST and PATCH
// endpoints answer by the IETF Idempotency-Key draft
// (draft-ietf-httpapi-idempotency-key-header-07), with the ops operation
// store behind it.
//
// A protected request names its key in the Idempotency-Key header. The
// middleware records it under (tenant, tool, key) with the fingerprint of
// its method, path, query and canonical body, runs the handler at most once
// per identity, and stores the handler's answer (status, chosen headers,
// body byte for byte). A retry with the same key gets the stored answer,
// marked by the Idempotent-Replayed header; a retry while the first still
// runs gets 409; the same key with a different request gets 422; a store
// that cannot be reached gets 503 with Retry-After and nothing runs. Every
// answer of the middleware's own is an RFC 9457 problem document saying
// whether a retry with the same key is safe ([Problem]).
//
// The handler runs as an external effect of the library ([ops.DoExternal]):
// its writes are not in the record's transaction, so the library treats
// what it cannot see honestly. An answer is stored only once the handler
// returned; a handler that panicked, died or answered 5xx has an unknown
// outcome, and the tool's effect decides whether the next retry runs it
// again or an operator must decide first (see [Config.Tool] and
// [Verdict]).
package idemhttp
