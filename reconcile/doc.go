// Package reconcile will hold human decisions on stuck operations (confirm
// completed, confirm not executed, mark failed, defer) and their audit
// trail. It arrives with the reconciliation issue; until then the package
// is empty on purpose.
package reconcile
