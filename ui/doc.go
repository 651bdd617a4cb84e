// Package ui will hold the Bubble Tea console: the overview, the operations
// browser and the reconciliation flow. It arrives with the console issue;
// until then the package is empty on purpose.
package ui
