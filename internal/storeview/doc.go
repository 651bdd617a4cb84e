// Package storeview reads the operation store for people: the console and
// the non-interactive commands run the same queries. Every time on a Row or
// an Overview comes from the database clock of the query that read it.
// What it reads is in internal/readmodel's types, which need no driver.
package storeview
