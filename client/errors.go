package client

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors callers branch on.
var (
	// ErrInvalidConfig is wrapped by New's errors.
	ErrInvalidConfig = errors.New("invalid client config")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
	// ErrNoNode: no node could serve the call. The error is a *NoNodeError
	// holding each node's failure.
	ErrNoNode = errors.New("no snowflaked node available")
	// ErrRejected: the request is wrong whichever node gets it (a 4xx: a
	// count out of range, a tag that does not exist); never retried. The
	// error is a *RejectedError with the status and code.
	ErrRejected = errors.New("request rejected by snowflaked")
)

// NoNodeError is the error of a call that no node could serve (every node
// tried failed, or none was left to try). errors.Is(err, ErrNoNode) holds,
// and errors.Is and errors.As see each cause (a timeout, a refused
// connection, a 503's text).
type NoNodeError struct {
	// What is what the call asked for ("IDs", "dense IDs of orders", "the
	// cluster's node list").
	What string
	// Causes are the failures, each naming its node: this call's, then the
	// last failure of each other node the client knows for this kind of ID
	// (why it is down).
	Causes []error
	// NotTried are the nodes known that were neither asked nor down.
	NotTried []string
}

// Error names each node's failure.
func (e *NoNodeError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNoNode.Error())
	if e.What != "" {
		b.WriteString(" for " + e.What)
	}
	b.WriteString(": ")
	var parts []string
	for _, c := range e.Causes {
		parts = append(parts, c.Error())
	}
	for _, n := range e.NotTried {
		parts = append(parts, n+": not tried")
	}
	if len(parts) == 0 {
		parts = append(parts, "no node is known (the discovery's list is empty)")
	}
	b.WriteString(strings.Join(parts, "; "))
	return b.String()
}

// Is reports whether target is ErrNoNode.
func (e *NoNodeError) Is(target error) bool { return target == ErrNoNode }

// Unwrap returns the causes.
func (e *NoNodeError) Unwrap() []error { return e.Causes }

// RejectedError is a request refused whichever node gets it: by a node
// (a 4xx other than a stale address's 404), or by the client itself before
// asking any (an argument out of range). errors.Is(err, ErrRejected)
// holds; errors.As gives the code to branch on.
type RejectedError struct {
	// Node is the node that answered; "" when the client refused the call
	// itself.
	Node string
	// Status is the node's HTTP status; 0 when the client refused it.
	Status int
	// Code is the API's error code (one of wire's Code constants, e.g.
	// wire.CodeUnknownTag, wire.CodeGeneOff); "" when the node's answer had
	// none. The client's own refusals use the code a node would answer.
	Code string
	// Message says what is wrong, for people.
	Message string
	// Max is the largest count the node accepts, with Code
	// wire.CodeInvalidCount from a node that reports it; 0 otherwise. The
	// client asks again for at most Max rather than returning a count it
	// asked for above Max.
	Max int
	// TagMax is the tag's per-request ceiling, with Code
	// wire.CodeInvalidCount when a tag's --max-count refused the count; 0
	// otherwise. The client learns it for the tag and never merges
	// callers beyond it.
	TagMax int
}

// Error names the node, status and code.
func (e *RejectedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrRejected.Error() + ": ")
	if e.Node != "" {
		b.WriteString(e.Node + ": " + strconv.Itoa(e.Status) + " ")
	}
	if e.Code != "" {
		b.WriteString(e.Code + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Is reports whether target is ErrRejected.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }
