import Mustache

extension SyncReportPage {
    /// sync-report.html as a Mustache template, rendered with a `PageContext`. `{{name}}` is HTML-escaped; only the
    /// plots' SVG, built with every text node escaped (`htmlEscape`), goes in unescaped through `{{{name}}}`.
    /// Well-formed XHTML (void elements closed, no HTML-only entities) so tests can parse it as XML; no xmlns,
    /// because the page must not name any address.
    static let pageTemplate = """
    <!DOCTYPE html>
    <html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>
    <title>coord sync report: {{takeID}} ({{status}})</title>
    <style>
    body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1120px;padding:0 16px;color:#1d1d1d;background:#fafafa}
    h1{font-size:22px;margin:0 0 8px;display:flex;align-items:center;gap:14px;flex-wrap:wrap}
    h2{font-size:18px;margin:30px 0 4px;border-bottom:2px solid #ddd;padding-bottom:3px}
    .badge{font-size:16px;font-weight:700;letter-spacing:.06em;text-transform:uppercase;color:#fff;padding:4px 12px;border-radius:6px}
    .badge.complete{background:#1b7f3b}.badge.partial{background:#c62828}
    .verdict{font-size:18px;padding:10px 14px;border-radius:6px;margin:8px 0 14px;border-left:8px solid}
    .verdict.good{background:#e8f5e9;border-color:#1b7f3b}.verdict.warn{background:#fff8e1;border-color:#f0a000}.verdict.bad{background:#ffebee;border-color:#c62828}
    .figures{display:flex;flex-wrap:wrap;gap:10px;margin:0 0 6px}
    .fig{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
    .fig .k{font-size:12px;color:#666;text-transform:uppercase;letter-spacing:.04em}.fig .v{font-size:22px;font-weight:700}
    .fig .v small{font-size:14px;font-weight:400;color:#444}
    .note{color:#555;font-size:13px;margin:2px 0 8px}
    svg.plot{display:block;width:100%;height:auto;background:#fff;border:1px solid #e0e0e0;border-radius:6px}
    svg.sound{display:block;width:100%;height:auto;background:#fff;border:1px solid #e0e0e0;border-radius:6px;margin:6px 0}
    svg .halo{paint-order:stroke;stroke:#fff;stroke-width:4px}
    table{border-collapse:collapse;background:#fff;margin:6px 0;font-size:14px}
    td,th{border:1px solid #d6d6d6;padding:4px 9px;text-align:right;vertical-align:top;white-space:nowrap}
    th{background:#f0f0f0;font-weight:600}
    td.l,th.l{text-align:left}
    tr.hot td.cost{background:#ffe0b2;font-weight:700}tr.over td.cost{background:#ffcdd2;font-weight:700}
    tr.off td{color:#9a9a9a}tr.uncalibrated td.cost{color:#8a5a00;font-style:italic}
    .chip{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
    td.detail{text-align:left;max-width:560px;white-space:normal}
    </style></head>
    <body>
    <h1><span class="badge {{status}}">{{status}}</span>Take {{takeID}}</h1>
    <p class="verdict {{tone}}">{{verdict}}</p>
    <div class="figures">
    <div class="fig"><div class="k">spread p50</div><div class="v">{{spread.p50}} <small>µs</small></div></div>
    <div class="fig"><div class="k">spread p99</div><div class="v">{{spread.p99}} <small>µs</small></div></div>
    <div class="fig"><div class="k">spread max</div><div class="v">{{spread.max}} <small>µs</small></div></div>
    {{#bound}}
    <div class="fig"><div class="k">bound p50 / p99 / max</div><div class="v">{{p50}} / {{p99}} / {{max}} <small>µs</small></div></div>
    {{/bound}}
    <div class="fig"><div class="k">groups</div><div class="v">{{groups}} <small>{{takeLength}}</small></div></div>
    <div class="fig"><div class="k">cameras</div><div class="v">{{cameraCount}} <small>{{onNodes}}</small></div></div>
    {{#timecode}}
    <div class="fig"><div class="k">timecode of group 0</div><div class="v timecode">{{.}}</div></div>
    {{/timecode}}
    </div>
    <p class="note">Spread: per group, the latest minus the earliest frame centre across cameras on the rig timebase (node estimates, dup rows left out), over {{groupsMeasured}} groups.{{#bound}} Bound: the same allowing two sigma of each camera's clock and centre error (the figure to trust).{{/bound}} Frame period {{framePeriodMilliseconds}} ms; started {{startWallclock}}.</p>
    <h2>Frame-centre error per camera</h2>
    <p class="note">centre_us − (t0 + group × frame period) for every delivered frame; long takes show each slice's min–max.</p>
    {{{errorPlot}}}
    <h2>Spread per group</h2>
    {{{spreadPlot}}}
    <h2>Clock uncertainty per node</h2>
    {{#hasClockTrack}}
    <p class="note">Every clock estimate sent to a node during the take: solid, the one-sigma uncertainty of its rig-time mapping; dashed and lighter, the bound (the most it can be off, path asymmetry included).</p>
    {{/hasClockTrack}}
    {{#clockNote}}
    <p class="note clock-note">{{clockNote}}</p>
    {{/clockNote}}
    {{{clockPlot}}}
    <h2>Drops and events</h2>
    <p class="note">One lane per camera: a tick for every dup row (a repeat of the previous frame). Numbered markers are the events in the table below.</p>
    {{{timelinePlot}}}
    <table class="events"><tr><th>#</th><th>t from t0</th><th class="l">node</th><th class="l">camera</th><th class="l">kind</th><th class="l">detail</th></tr>
    {{#events}}
    <tr><td>{{number}}</td><td>{{seconds}} s</td><td class="l">{{node}}</td><td class="l">{{camera}}</td><td class="l"><span class="chip" style="background:{{color}}"></span>{{kind}}</td><td class="detail">{{detail}}</td></tr>
    {{/events}}
    {{^events}}
    <tr><td colspan="6" class="l">no events</td></tr>
    {{/events}}
    </table>
    <h2>Cameras</h2>
    <table class="cameras"><tr><th class="l">node</th><th class="l">camera</th><th>frames</th><th>dropped</th><th>held</th><th>phase p50 µs</th><th>phase p99 µs</th><th>phase max µs</th><th>clock ± µs</th><th>centre ± µs</th>{{#hasState}}<th class="l">state</th>{{/hasState}}</tr>
    {{#cameras}}
    <tr class="{{rowClass}}"><td class="l"><span class="chip" style="background:{{color}}"></span>{{node}}</td><td class="l">{{camera}}</td><td>{{frames}}</td><td>{{dropped}}</td><td>{{held}}</td><td>{{phaseP50}}</td><td>{{phaseP99}}</td><td>{{phaseMax}}</td><td>{{clock}}</td><td>{{centre}}</td>{{#hasState}}<td class="l">{{state}}</td>{{/hasState}}</tr>
    {{/cameras}}
    </table>
    {{#sound}}
    <h2>Sound</h2>
    <p class="note">Each microphone's file starts at group 0's instant on the rig's sample grid. A/V offset: how far each buffer's timestamp lies from where the file puts it (the node's own figure, timestamp noise included); rate error: the device's sample clock against the rig clock, measured and corrected in the file.</p>
    {{{soundPlot}}}
    <table class="cameras"><tr><th class="l">node</th><th class="l">microphone</th><th>seconds</th><th>A/V offset p50 µs</th><th>A/V offset p99 µs</th><th>rate error ppm</th><th class="l">file</th><th class="l">state</th></tr>
    {{#mics}}
    <tr><td class="l">{{node}}</td><td class="l">{{mic}}</td><td>{{seconds}}</td><td>{{p50}}</td><td>{{p99}}</td><td>{{rate}}</td><td class="l">{{path}}</td><td class="l">{{state}}</td></tr>
    {{/mics}}
    </table>
    {{/sound}}
    {{#budget}}
    <h2>Budget</h2>
    <p>Hardware cost <b>{{cost}}</b>{{#counted}} (the most loaded node's; must stay under 1.00){{/counted}}{{#longestTake}} · longest take the nodes sustain: {{longestTake}}{{/longestTake}}.{{#uncounted}} <span class="uncounted">{{.}}.</span>{{/uncounted}} Rows at 0.80 or more are highlighted.</p>
    <table class="budget"><tr><th class="l">node</th><th class="l">resource</th><th>demand</th><th>capacity</th><th>cost</th></tr>
    {{#rows}}
    {{^isNote}}
    <tr class="{{rowClass}}"><td class="l">{{node}}</td><td class="l">{{resource}}</td><td>{{demand}}</td><td>{{capacity}}</td><td class="cost">{{cost}}</td></tr>
    {{/isNote}}
    {{#isNote}}
    <tr><td class="l">{{node}}</td><td class="detail" colspan="4">{{note}}</td></tr>
    {{/isNote}}
    {{/rows}}
    </table>
    {{#hasChanges}}
    <p>Fit changes before the take:</p>
    <ul>
    {{#changes}}
    <li>{{.}}</li>
    {{/changes}}
    </ul>
    {{/hasChanges}}
    {{/budget}}
    <h2>Files</h2>
    <table class="files"><tr><th class="l">file</th><th>bytes</th>{{#hasXXH128}}<th class="l">xxh128</th>{{/hasXXH128}}</tr>
    {{#files}}
    <tr><td class="l">{{path}}</td><td>{{size}}</td>{{#hasXXH128}}<td class="l hash">{{xxh128}}</td>{{/hasXXH128}}</tr>
    {{/files}}
    {{^files}}
    <tr><td colspan="2" class="l">no files</td></tr>
    {{/files}}
    </table>
    <p class="note">Written by coord from manifest.json, sync-report.json and the cameras' frames.csv files; this page loads nothing from anywhere.</p>
    </body></html>

    """

    /// Parsed once: the template is a constant, so a parse error is a programming error every test would hit.
    static let template: MustacheTemplate = {
        do { return try MustacheTemplate(string: pageTemplate) } catch { fatalError("sync-report.html template: \(error)") }
    }()
}
