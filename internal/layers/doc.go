// Package layers holds no code: its test keeps the module's map true. The
// README's Packages table names every package of the module, and the
// import directions it states hold (go list -deps), so that a newcomer's
// map matches the territory.
package layers
