// Package readmodel is what the operation store's readers answer in, and
// what they are asked: rows, details, overviews and counts; queries,
// filters (and their language, ParseFilter and ParseAuditFilter), states
// and sorts; audit rows, pages and filters. internal/storeview reads them
// from the database; the console and reconcile/bulk use them without
// depending on the driver, so nothing here imports pgx.
package readmodel
