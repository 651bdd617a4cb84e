package idemhttp

import (
	"errors"
	"net/http"
	"time"
)

// TenantError is what a Config.Tenant function returns to choose the
// answer to a request it refuses: Status (a 4xx or 5xx: 401 when the
// credentials are missing or wrong, 403 when they may not use the
// endpoint; 400 when unset or outside 400 to 599) and Detail (the text the
// client sees; a generic one when empty). Err is the cause, for the
// service's own use: it is never sent.
type TenantError struct {
	Status int
	Detail string
	Err    error
}

func (e *TenantError) Error() string {
	switch {
	case e.Err != nil && e.Detail != "":
		return e.Detail + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	case e.Detail != "":
		return e.Detail
	}
	return http.StatusText(e.status())
}

func (e *TenantError) Unwrap() error { return e.Err }

// status is the answer's status.
func (e *TenantError) status() int {
	if e.Status < 400 || e.Status > 599 {
		return http.StatusBadRequest
	}
	return e.Status
}

// refuseTenant answers a request whose Tenant function failed. Nothing
// ran, so a retry with the same key is safe; it may succeed unchanged
// only when the service's own failure (5xx) was the cause.
func (m *Middleware) refuseTenant(w http.ResponseWriter, r *http.Request, err error) {
	p := Problem{Type: TypeTenantInvalid, Title: "The request's tenant is refused", Status: http.StatusBadRequest,
		Detail: "the service could not tell which tenant the request is for"}
	var te *TenantError
	if errors.As(err, &te) {
		p.Status = te.status()
		if te.Detail != "" {
			p.Detail = te.Detail
		}
	}
	p.Detail += "; nothing ran"
	var retryAfter time.Duration
	if p.Status >= 500 {
		p.RetryWithSameKey = true
		retryAfter = m.opts.UnavailableRetryAfter
	}
	m.writeProblem(w, r, p, retryAfter)
}
