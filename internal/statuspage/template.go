package statuspage

import (
	"html/template"
	"strings"
)

// breakable splits s after each '-', '.', ':', '/', '_' and '@', so that the
// template can offer a line break (<wbr>) there: a long node key wraps
// between its parts, never inside a host name's label or a port.
func breakable(s string) []string {
	var parts []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "-.:/_@")
		if i < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i+1])
		s = s[i+1:]
	}
	return parts
}

// pageTemplate is the whole page: inline CSS, no scripts, nothing loaded.
// html/template escapes every value for its context (text or attribute).
var pageTemplate = template.Must(template.New("status").Funcs(template.FuncMap{"breakable": breakable}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{- if .Refresh}}
<meta http-equiv="refresh" content="{{.Refresh}}">
{{- end}}
<title>{{.Title}}</title>
<style>
  :root { --ok:#1a7f37; --warn:#9a6700; --bad:#cf222e; --line:#d0d7de; --muted:#57606a; }
  * { box-sizing: border-box; }
  body { margin: 0; padding: 20px 24px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1f2328; background: #f6f8fa; }
  h1 { font-size: 20px; margin: 0 0 12px; }
  h1 .key { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
  h2 { font-size: 16px; margin: 20px 0 8px; }
  .card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
  dt { color: var(--muted); }
  dd { margin: 0; }
  .badge { display: inline-block; padding: 1px 10px; border-radius: 12px; color: #fff; font-weight: 600; }
  .badge.ok { background: var(--ok); } .badge.warn { background: var(--warn); } .badge.bad { background: var(--bad); }
  .error { background: #ffebe9; border: 1px solid #ff8182; color: #82071e; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
  table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
  th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { background: #eaeef2; font-weight: 600; }
  td.num { font-variant-numeric: tabular-nums; }
  td.key, td.addr { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
  td.key { overflow-wrap: break-word; word-break: normal; min-width: 12ch; }
  h1 .key { overflow-wrap: break-word; }
  .scroll { overflow-x: auto; }
  nav { margin: 0 0 12px; color: var(--muted); font-size: 13px; }
  nav a, nav strong { margin-left: 6px; }
  td.addr { white-space: nowrap; }
  tr.self { background: #ddf4ff; }
  tr.down td { color: var(--muted); }
  tr.flagged td:first-child { box-shadow: inset 4px 0 0 var(--bad); }
  td.over { background: #ffebe9; color: #82071e; font-weight: 700; }
  .marker { display: inline-block; white-space: nowrap; margin-left: 6px; padding: 0 6px; border-radius: 4px; background: var(--bad); color: #fff; font-size: 12px; font-weight: 700; }
  .yes { color: var(--ok); font-weight: 600; } .no { color: var(--bad); font-weight: 600; }
  .tag { font-size: 12px; color: var(--muted); }
  .note { color: var(--muted); font-size: 13px; }
  td.note { min-width: 18ch; }
  footer { margin-top: 14px; color: var(--muted); font-size: 12px; }
</style>
</head>
<body>
<h1>snowflaked <span class="key">{{range breakable .Self.NodeKey}}{{.}}<wbr>{{end}}</span></h1>
<nav id="refresh">Reload every:{{range .Refreshes}}{{if eq . $.Refresh}}<strong>{{if .}}{{.}}s{{else}}off{{end}}</strong>{{else}}<a href="?refresh={{.}}">{{if .}}{{.}}s{{else}}off{{end}}</a>{{end}}{{end}}</nav>
<section class="card" id="self">
<dl>
  <dt>State</dt><dd><span class="badge {{.Self.StateClass}}" id="self-state">{{.Self.State}}</span>{{if .Self.Reason}} <strong id="self-reason">{{.Self.Reason}}</strong>{{end}}{{if .Self.Detail}} <span class="note">{{.Self.Detail}}</span>{{end}}</dd>
  {{- if .Self.Since}}
  <dt>Since</dt><dd>{{.Self.Since}}</dd>
  {{- end}}
  <dt>Worker ID</dt><dd id="self-worker">{{.Self.WorkerID}}</dd>
  <dt>Address</dt><dd>{{.Self.Addr}}</dd>
  <dt>Mode</dt><dd id="self-mode">{{.Self.Mode}}</dd>
  {{- if .Self.Cluster}}
  <dt>Cluster</dt><dd id="self-cluster">{{.Self.Cluster}}</dd>
  {{- end}}
  <dt>Version</dt><dd id="self-version">{{.Self.Version}}</dd>
  <dt>Layout</dt><dd id="self-layout">{{.Self.Layout}}</dd>
  <dt>Fence</dt><dd id="self-fence">{{.Self.Fence}}{{if .Self.FenceNote}} <span class="note">{{.Self.FenceNote}}</span>{{end}}</dd>
  <dt>Clock − NTP</dt><dd{{if .Self.NTP.Over}} class="over"{{end}} title="{{.Self.NTP.Title}}">{{.Self.NTP.Text}}{{if .Self.NTP.Over}}<span class="marker">⚠ over limit</span>{{end}}</dd>
  {{- if .Self.ZK}}
  <dt>ZooKeeper</dt><dd>{{.Self.ZK}}</dd>
  <dt>ZooKeeper fence</dt><dd id="self-zk-fence">{{.Self.ZKFence}}</dd>
  {{- end}}
  {{- if .Self.TLS}}
  <dt>TLS</dt><dd id="self-tls">{{.Self.TLS}}</dd>
  {{- end}}
</dl>
</section>
{{- if .Self.ShowSegments}}
<h2>Segment tags served by this node: {{len .Self.Segments}}</h2>
{{- if .Self.Segments}}
<table id="segments">
<thead>
<tr><th>Tag</th><th title="unissued IDs in memory (current and next buffer)">Available</th><th>Held ranges</th><th title="IDs issued since this process started">Issued</th><th title="the step of the next range load">Step</th><th>Loads</th><th title="IDs a kill -9 now would lose">Mark ahead</th><th title="IDs this node lost (ranges it could not return)">Wasted</th><th>Notes</th></tr>
</thead>
<tbody>
{{- range .Self.Segments}}
<tr data-tag="{{.Tag}}"><td class="key">{{.Tag}}</td><td class="num">{{.Available}}</td><td class="note">{{range .Held}}{{.}} {{end}}</td><td class="num">{{.Issued}}</td><td class="num">{{.Step}}</td><td class="num">{{.Loads}}</td><td class="num">{{.Ahead}}</td><td class="num{{if .Wasted}} over{{end}}">{{.Wasted}}</td><td class="note">{{if .Token}}token required; refused: {{.RefusedRequired}} without, {{.RefusedInvalid}} invalid. {{end}}{{.Error}}</td></tr>
{{- end}}
</tbody>
</table>
{{- else}}
<p class="note" id="segments-none">No tag asked for yet (GET /segment/{tag} loads one).</p>
{{- end}}
{{- end}}
{{- if not .Standalone}}
{{- if .ListError}}
<div class="error" id="list-error">{{.ListError}}</div>
{{- end}}
<h2>Cluster: {{.Nodes}} node{{if ne .Nodes 1}}s{{end}}, {{.InService}} in service{{if .Flagged}}, <span class="no">{{.Flagged}} with figures over the limits</span>{{end}}</h2>
<p class="note" id="nodes-total">ZooKeeper holds <strong id="nodes-total-count">{{.Total}}</strong> node{{if ne .Total 1}}s{{end}} in this cluster; this view lists at most {{.Limit}}{{if lt .Limit .Total}} (this node first, then by node key){{if lt .Limit .More}}: <a href="?limit={{.More}}">?limit={{.More}}</a> lists more{{end}}{{end}}.</p>
<div class="scroll">
<table id="nodes">
<thead>
<tr><th>Worker</th><th>Node key</th><th>Address</th><th>In service</th><th>State</th><th title="the node's clock minus NTP time; limit {{.NTPMax}}">Clock − NTP</th><th title="the node's clock minus this node's; limit {{.PeerMax}}">Clock − this node</th><th title="limit {{.ReportMax}} for running nodes">Last report</th><th title="the ZooKeeper fence minus now: how long its holder may issue without a renewal">ZK fence</th><th>Notes</th></tr>
</thead>
<tbody>
{{- range .Rows}}
<tr class="{{if .Self}}self{{end}}{{if .Down}} down{{end}}{{if .Flagged}} flagged{{end}}" data-worker="{{.WorkerID}}">
<td class="num worker">{{.WorkerID}}{{if .Self}} <span class="tag">(this node)</span>{{end}}</td>
<td class="key">{{range breakable .NodeKey}}{{.}}<wbr>{{end}}</td>
<td class="addr">{{.Addr}}</td>
<td class="service">{{if .InService}}<span class="yes">yes</span>{{else}}<span class="no">no</span>{{end}}</td>
<td class="state" title="{{.Detail}}">{{.State}}{{if .Reason}} ({{.Reason}}){{end}}{{if .Detail}}<div class="note">{{.Detail}}</div>{{end}}</td>
<td class="num ntp{{if .NTP.Over}} over{{end}}" title="{{.NTP.Title}}">{{.NTP.Text}}{{if .NTP.Over}}<span class="marker">⚠ over limit</span>{{end}}</td>
<td class="num peer{{if .Peer.Over}} over{{end}}" title="{{.Peer.Title}}">{{.Peer.Text}}{{if .Peer.Over}}<span class="marker">⚠ over limit</span>{{end}}</td>
<td class="num report{{if .Report.Over}} over{{end}}" title="{{.Report.Title}}">{{.Report.Text}}{{if .Report.Over}}<span class="marker">⚠ stale</span>{{end}}</td>
<td class="num zkfence{{if .ZKFence.Over}} over{{end}}" title="{{.ZKFence.Title}}">{{.ZKFence.Text}}{{if .ZKFence.Over}}<span class="marker">⚠ passed</span>{{end}}</td>
<td class="note">{{.Note}}</td>
</tr>
{{- end}}
</tbody>
</table>
</div>
{{- end}}
<footer>Generated {{.GeneratedAt}} by this node. Limits: clock − NTP {{.NTPMax}}{{if not .Standalone}}, clock − this node {{.PeerMax}}, last report {{.ReportMax}}{{end}}. Offsets are positive when the node is ahead.</footer>
</body>
</html>
`))
