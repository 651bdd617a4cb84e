// Package ops runs mutating operations so that a retry never duplicates an
// effect and an effect whose outcome nobody saw is never guessed.
//
// Every operation is recorded in the PostgreSQL operation store under its
// identity (tenant, tool, key) with the SHA-256 fingerprint of its canonical
// intent. An equivalent retry replays the stored result; a retry with a
// changed intent is refused and recorded; concurrent attempts are serialized
// by the database.
//
// Local effects run in one transaction with their record ([DoTx]). External
// effects commit a pending reservation under an expiring lease first, call the
// provider with the same key, and complete with a compare-and-set on the
// attempt number ([DoExternal]). A record whose outcome is unknown stays
// pending; once its lease expires it is taken over automatically only where
// that is safe, and otherwise waits for a person ([ErrNeedsReconciliation]).
//
// Every error is one class a caller matches with errors.Is (see the sentinel
// errors). When the database fails, the class says what was written: nothing
// ([ErrUnavailable]), nothing because the database refused ([ErrStoreRefused]), or
// nobody knows ([ErrOutcomeUnknown], [ErrNotRecorded]). [Retry] tries a call
// again where that settles it without a person.
//
// All lease and age arithmetic uses the database clock.
//
// [New] takes a [Pool], what the Store needs of its database;
// *pgxpool.Pool is one.
//
// There is no Tx twin of [DoTx] (as River's Insert has InsertTx): DoTx
// begins the transaction itself because it must own its whole life. It
// reads the record and inserts or locks it first, runs fn, stores the
// result, and commits, so that fn's writes and the record commit or roll
// back together; it chooses the isolation level, retries a lost race on
// the record with a fresh transaction (replaying the winner's result), and
// classifies the commit's failure (an unknown commit is ErrOutcomeUnknown).
// In a caller's transaction it could do none of that: the caller's earlier
// statements would hold locks across fn, a rollback for the race would
// take the caller's work with it, and the commit, where the outcome is
// decided, would be the caller's. Run the caller's other writes inside fn,
// on the tx it is given.
//
// The vocabulary that needs no database ([Identity], [Effect] and its
// values, [Keyring], [KeyBytes]) is declared in ops/opsmodel, so that the
// opsdesk console can use it without depending on pgx; the names here are
// aliases and forwarders to it, and services keep writing ops.Identity.
// What only readers of the store need (opsmodel.EncryptedKeyID,
// opsmodel.OpenStored, opsmodel.ProviderKeyPrefix) is opsmodel's alone.
package ops
