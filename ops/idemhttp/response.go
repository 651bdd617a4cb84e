package idemhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// ErrAnswerTooLarge is what a protected handler's Write returns once its
// answer is over Config.MaxAnswer. The answer is then neither sent nor
// kept: the client gets 500 answer-too-large, and retries with the key get
// 410 (see TypeAnswerTooLarge).
var ErrAnswerTooLarge = errors.New("idemhttp: the answer is over Config.MaxAnswer; it is neither sent nor kept")

// storedResponse is what the store keeps of a handler's answer and what a
// replay sends. Body is a []byte, which encoding/json writes as base64: a
// JSON string survives any way the store keeps JSON (jsonb reorders
// objects and respaces them), so the body replays byte for byte.
type storedResponse struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body"`
	// NotKept says why the answer is not kept (too large), in place of
	// its header and body: replays answer 410.
	NotKept string `json:"not_kept,omitempty"`
}

// answerEnvelopeBytes is the most a stored answer takes besides its
// header and body: {"status":999,"header":,"body":""}.
const answerEnvelopeBytes = len(`{"status":999,"header":,"body":""}`)

// answerCapacity is the largest body whose stored answer fits maxResult
// bytes with up to MaxStoredHeaderBytes of chosen headers: base64 writes
// 4 bytes for every 3, the last 1 or 2 padded to 4.
func answerCapacity(maxResult int) int64 {
	room := maxResult - MaxStoredHeaderBytes - answerEnvelopeBytes
	if room < 4 {
		return 0
	}
	return int64(room / 4 * 3)
}

// recorder captures a handler's answer instead of sending it: the answer
// may be sent only once the store holds it (or was told it is unknown).
// It does not implement http.Flusher or http.Hijacker: a protected
// endpoint's answer is one buffered response.
type recorder struct {
	header http.Header
	// sent is the header as it was when the status was written, as
	// net/http would have sent it.
	sent   http.Header
	status int
	body   bytes.Buffer
	// limit is Config.MaxAnswer; written counts what the handler wrote,
	// limit or not.
	limit, written int64
	// tooLarge says why the answer is not kept ("" while it is).
	tooLarge string
}

func newRecorder(limit int64) *recorder { return &recorder{header: http.Header{}, limit: limit} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		// As net/http does: a programming error in the handler.
		panic(fmt.Sprintf("idemhttp: invalid WriteHeader code %v", code))
	}
	if r.status != 0 || code < 200 {
		// A second status is ignored, as by net/http. Informational
		// answers (103 Early Hints) are dropped: nothing is sent before
		// the final answer is stored.
		return
	}
	r.status = code
	r.sent = r.header.Clone()
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.status == http.StatusNoContent || r.status == http.StatusNotModified {
		return 0, http.ErrBodyNotAllowed // as net/http says
	}
	r.written += int64(len(p))
	if r.written > r.limit {
		// Nothing more is buffered: the answer will not be sent.
		return 0, ErrAnswerTooLarge
	}
	return r.body.Write(p)
}

// tooLargeReason says why the stored answer s would not be kept, or "".
func (r *recorder) tooLargeReason(s storedResponse, maxAnswer int64) string {
	if r.written > maxAnswer {
		return fmt.Sprintf("its body of at least %d bytes was over the limit of %d (Config.MaxAnswer)", r.written, maxAnswer)
	}
	if s.Header == nil {
		return ""
	}
	js, err := json.Marshal(s.Header)
	if err == nil && len(js) > MaxStoredHeaderBytes {
		return fmt.Sprintf("its stored headers were %d bytes as JSON, over the limit of %d (MaxStoredHeaderBytes)", len(js), MaxStoredHeaderBytes)
	}
	return ""
}

// finish completes the answer of a handler that returned: the status and
// content type net/http would have sent.
func (r *recorder) finish() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	// net/http sniffs a missing Content-Type from the body; do it here so
	// that the first answer and its replays carry the same one. A handler
	// that set the header to nil asked for none.
	if _, set := r.sent["Content-Type"]; !set && r.body.Len() > 0 {
		r.sent.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
	}
}

// stored is the part of the answer that is stored: the status, the chosen
// headers and the body.
func (r *recorder) stored(headers []string) storedResponse {
	s := storedResponse{Status: r.status, Body: r.body.Bytes()}
	for _, name := range headers {
		if v, ok := r.sent[name]; ok {
			if s.Header == nil {
				s.Header = http.Header{}
			}
			s.Header[name] = v
		}
	}
	return s
}

// send writes the handler's whole answer, every header included.
func (r *recorder) send(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.sent {
		h[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes()) // the client may be gone
}

// replay writes a stored answer, saying it is a replay in replayHeader.
func (s storedResponse) replay(w http.ResponseWriter, replayHeader string) {
	h := w.Header()
	for k, v := range s.Header {
		h[k] = v
	}
	h.Set(replayHeader, "true")
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
}
