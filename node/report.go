package node

import (
	"time"

	"snowflaked/clock"
	"snowflaked/clockguard"
	"snowflaked/snowflake"
)

// Modes of a node, as reported by GET /clock.
const (
	ModeStandalone = "standalone"
	ModeZooKeeper  = "zookeeper"
)

// ClockReport is the body of GET /clock (SPEC §5). The sections of checks
// that are not running are left out; the NTP, peer and ZooKeeper checks fill
// theirs through ReportSources.
type ClockReport struct {
	Mode         string            `json:"mode"`
	WorkerID     int64             `json:"worker_id"`
	Layout       string            `json:"layout"`
	Epoch        string            `json:"epoch"`
	TimeUnit     string            `json:"time_unit"`
	NowMs        int64             `json:"now_ms"`
	LastIssuedMs int64             `json:"last_issued_ms"` // start of the last issued tick (or of the tick the node started after)
	FenceMs      int64             `json:"fence_ms"`       // fence last persisted locally
	State        string            `json:"state"`
	Reason       string            `json:"reason"`
	Detail       string            `json:"detail,omitempty"`
	Failing      map[string]string `json:"failing,omitempty"` // every failing check and its figures
	NTP          any               `json:"ntp,omitempty"`
	Peers        any               `json:"peers,omitempty"`
	ZK           any               `json:"zk,omitempty"`
}

// ReportSources are the optional sections of the report; each func returns
// a JSON-marshalable value (nil leaves the section out). Set by the checks
// that own them.
type ReportSources struct {
	NTP, Peers, ZK func() any
}

// reporter builds ClockReports for one node.
type reporter struct {
	mode    string
	clock   clock.Clock
	gen     *snowflake.Generator
	guard   *clockguard.Guard
	fence   func() int64
	sources ReportSources
}

func (r *reporter) report() ClockReport {
	l := r.gen.Layout()
	st := r.guard.Status()
	rep := ClockReport{
		Mode: r.mode, WorkerID: r.gen.WorkerID(),
		Layout: l.String(), Epoch: l.Epoch.UTC().Format(time.RFC3339Nano), TimeUnit: l.Unit.String(),
		NowMs: clock.UnixMilli(r.clock), LastIssuedMs: r.gen.LastUnixMilli(), FenceMs: r.fence(),
		State: st.State.String(), Reason: string(st.Reason), Detail: st.Detail,
	}
	if f := r.guard.Failing(); len(f) > 0 {
		rep.Failing = make(map[string]string, len(f))
		for reason, detail := range f {
			rep.Failing[string(reason)] = detail
		}
	}
	section := func(fn func() any) any {
		if fn == nil {
			return nil
		}
		return fn()
	}
	rep.NTP, rep.Peers, rep.ZK = section(r.sources.NTP), section(r.sources.Peers), section(r.sources.ZK)
	return rep
}
