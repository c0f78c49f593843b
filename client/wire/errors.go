package wire

// The codes of the API's errors: the "code" of an ErrorBody. Each one's
// comment starts with the HTTP status it comes with.
const (
	// CodeInvalidCount, status 400: count is missing or outside 1..max-batch.
	CodeInvalidCount = "invalid_count"
	// CodeInvalidFormat, status 400: format is none of the values the
	// endpoint accepts (text, json, and where IDs or UUIDs are written or
	// read, base62, base58, base36 and base32).
	CodeInvalidFormat = "invalid_format"
	// CodeInvalidParameter, status 400: an unknown or repeated query
	// parameter.
	CodeInvalidParameter = "invalid_parameter"
	// CodeInvalidID, status 400: /decode/{id} is not an ID of the layout
	// (or, with format, not a string of that encoding).
	CodeInvalidID = "invalid_id"
	// CodeInvalidRange, status 400: /bounds' from or to is missing or
	// malformed, from is before the layout's epoch, to after the end of
	// its time field, or the range is reversed or empty.
	CodeInvalidRange = "invalid_range"
	// CodeInvalidKey, status 400: an empty Leaf key.
	CodeInvalidKey = "invalid_key"
	// CodeInvalidGene, status 400: gene is not a decimal 0..2^63-1.
	CodeInvalidGene = "invalid_gene"
	// CodeGeneOff, status 400: gene on a cluster without gene bits.
	CodeGeneOff = "gene_off"
	// CodeTagExhausted, status 503: an opaque tag handed out all of its
	// numbers.
	CodeTagExhausted = "tag_exhausted"
	// CodePeriodExhausted, status 503: a reset tag's period handed out
	// every number its format's width prints (the message names the
	// width); the next period starts again.
	CodePeriodExhausted = "period_exhausted"
	// CodeInvalidUUID, status 400: /decode/{uuid} is not a UUID of the
	// cluster's layout.
	CodeInvalidUUID = "invalid_uuid"
	// CodeUUIDOff, status 400: the layout leaves fewer than 32 random bits
	// in a UUIDv7.
	CodeUUIDOff = "uuid_off"
	// CodeInvalidRefresh, status 400: /status's refresh is not a whole
	// number of seconds from 0 to 3600, is given twice, or comes with
	// another parameter.
	CodeInvalidRefresh = "invalid_refresh"
	// CodeBadRequest, status 400: the request could not be parsed.
	CodeBadRequest = "bad_request"
	// CodeNotFound, status 404: no such path.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed, status 405: a method other than GET or HEAD.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeRequestTimeout, status 408: the request took too long to arrive.
	CodeRequestTimeout = "request_timeout"
	// CodeBodyTooLarge, status 413: the request body is too large.
	CodeBodyTooLarge = "body_too_large"
	// CodeHeaderTooLarge, status 431: the request header is too large.
	CodeHeaderTooLarge = "header_too_large"
	// CodeInternal, status 500: a bug (a panic, an unencodable report).
	CodeInternal = "internal"
	// CodeOutOfService, status 503: the node is not in service (its clock
	// guard's state and reason are in the body).
	CodeOutOfService = "out_of_service"
	// CodeClockRollback, status 503: the generator saw the clock go back
	// beyond tolerance.
	CodeClockRollback = "clock_rollback"
	// CodeFenceReached, status 503: the next ID would pass the time fence.
	CodeFenceReached = "fence_reached"
	// CodeBorrowExhausted, status 503: borrowing through a rollback reached
	// the time fence.
	CodeBorrowExhausted = "borrow_exhausted"
	// CodeTimeOverflow, status 503: the layout's timestamp field is
	// exhausted.
	CodeTimeOverflow = "time_overflow"
	// CodeClockError, status 503: the clock is stalled or before the epoch.
	CodeClockError = "clock_error"
	// CodeIDError, status 503: any other refusal of the generator.
	CodeIDError = "id_error"
	// CodeBatchTimeout, status 503: a batch would take longer than the
	// node's bound to issue; the request's doing, not the node's (a client
	// keeps the node in rotation).
	CodeBatchTimeout = "batch_timeout"
	// CodeUnknownTag, status 404: no such segment tag in ZooKeeper (a
	// client does not ask another node).
	CodeUnknownTag = "unknown_tag"
	// CodeInvalidTag, status 400: the tag cannot be a tag name.
	CodeInvalidTag = "invalid_tag"
	// CodeSegmentsOff, status 404: the node runs without ZooKeeper, so
	// without segment mode.
	CodeSegmentsOff = "segments_off"
	// CodeSegmentUnavailable, status 503: no ID of the tag left and no range
	// could be loaded.
	CodeSegmentUnavailable = "segment_unavailable"
	// CodeTokensUnconfirmed, status 503: the tag requires a token and the
	// node cannot confirm which tokens it accepts now: ZooKeeper does not
	// answer, and the tag's token hashes the node holds were read longer
	// ago than its --token-stale-limit (or never). Another node, or this
	// one once ZooKeeper answers, can.
	CodeTokensUnconfirmed = "tokens_unconfirmed"
	// CodeClientNotAllowed, status 403: the node serves mutual TLS and the
	// client certificate's name is not on the path's allow-list
	// (--tls-client-allow, --tls-admin-allow).
	CodeClientNotAllowed = "client_not_allowed"
	// CodeTokenRequired, status 401: the tag requires a token and the
	// request carried none.
	CodeTokenRequired = "token_required"
	// CodeTokenInvalid, status 403: the request's token is not one of the
	// tag's valid tokens.
	CodeTokenInvalid = "token_invalid"
)

// ErrorBody is the JSON body of an error answer:
// {"error":{"code":…,"message":…}}.
type ErrorBody struct {
	// Error is the error.
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the "error" object of an ErrorBody.
type ErrorDetail struct {
	// Code is one of the Code constants: what programs branch on.
	Code string `json:"code"`
	// Message says what went wrong, for people.
	Message string `json:"message"`
	// Max is the largest count the node accepts (its --max-batch), only
	// with CodeInvalidCount; zero (left out of the JSON) with any other
	// code. A client that asked for more can ask again for at most Max.
	Max int `json:"max,omitempty"`
	// TagMax is a segment tag's per-request ceiling (snowflakectl segment
	// create --max-count), only with CodeInvalidCount when the request
	// asked for more; zero (left out) otherwise. A client that merged
	// several callers' requests into one can ask in parts of at most
	// TagMax; one caller asking for more is refused.
	TagMax int `json:"tag_max,omitempty"`
}

// UnavailableBody is the JSON body of a 503 answer: an ErrorBody whose
// error also carries the node's state and the reason for it,
// {"error":{"code":…,"message":…,"reason":…,"state":…}}.
type UnavailableBody struct {
	// Error is the error.
	Error UnavailableDetail `json:"error"`
}

// UnavailableDetail is the "error" object of an UnavailableBody.
type UnavailableDetail struct {
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Message says what went wrong, for people.
	Message string `json:"message"`
	// Reason is why the node is out of service (its clock guard's reason,
	// or the code of the generator's refusal).
	Reason string `json:"reason"`
	// State is the node's state (in_service, degraded, …).
	State string `json:"state"`
}
