package client

import "slices"

// Discovery tells a Client which nodes to call. The client asks for the
// list once in New and again each time the channel it got with the list
// is closed; it never closes a Discovery (whoever made it does, after
// closing the client).
//
// Static, Bootstrap and zkdiscovery.Discovery (the subpackage that follows
// ZooKeeper) implement it; so can anything else that knows the nodes. The
// client talks to a subset of the nodes listed (Config.Subset), in the
// list's order.
type Discovery interface {
	// Nodes returns the nodes to call now, "host:port" each, in the order
	// to try them, and a channel that is closed once the list has changed
	// (then Nodes gives the new list and a new channel). A nil channel
	// says the list never changes. Nodes must be quick and safe for
	// concurrent use; the client does not keep or change the slice.
	Nodes() (nodes []string, changed <-chan struct{})
}

// Static is a list of nodes that never changes ("host:port" each): what
// Config.Servers gives.
type Static []string

// Nodes returns a copy of the list and a nil channel: it never changes.
func (s Static) Nodes() ([]string, <-chan struct{}) { return slices.Clone([]string(s)), nil }

// follow applies each new list of the discovery until the client closes.
func (c *Client) follow(changed <-chan struct{}) {
	defer c.done.Done()
	for changed != nil {
		select {
		case <-c.stop:
			return
		case <-changed:
		}
		var nodes []string
		nodes, changed = c.cfg.Discovery.Nodes()
		c.setNodes(nodes)
	}
}
