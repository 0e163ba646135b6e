extension ConsolePage {
    /// The page's style sheet: the operator's dark room, from a 360 px phone to a 4K monitor.
    static let style = """
  :root { --bg:#111315; --panel:#1b1e21; --line:#2c3136; --text:#d8dde2; --dim:#8a939c; --ok:#5fbf7a; --warn:#e0b050; --bad:#e06060; --accent:#5aa0e0; }
  * { box-sizing: border-box; }
  body { margin:0; background:var(--bg); color:var(--text); font:14px/1.4 system-ui, sans-serif; }
  header { display:flex; flex-wrap:wrap; align-items:center; gap:4px 16px; padding:8px 16px; border-bottom:1px solid var(--line); }
  header h1 { font-size:16px; margin:0; font-weight:600; }
  #connection { margin-left:auto; color:var(--dim); }
  #banner { display:none; background:var(--bad); color:#fff; padding:6px 16px; font-weight:600; }
  #banner.shown { display:block; }
  main { display:grid; grid-template-columns: minmax(0, 1fr) 360px; gap:12px; padding:12px; }
  main > div { min-width:0; }
  section { background:var(--panel); border:1px solid var(--line); border-radius:6px; padding:10px; margin-bottom:12px; }
  h2 { font-size:13px; text-transform:uppercase; letter-spacing:.06em; color:var(--dim); margin:0 0 8px; font-weight:600; }
  button { background:#2a3036; color:var(--text); border:1px solid #3a424a; border-radius:4px; padding:5px 10px; cursor:pointer; font:inherit; }
  button:hover:not(:disabled) { border-color:var(--accent); }
  button:disabled { opacity:.45; cursor:default; }
  button.primary { background:#23476b; border-color:#2f5f8f; }
  button.danger { background:#6b2323; border-color:#8f2f2f; }
  input, select { background:#0e1012; color:var(--text); border:1px solid #3a424a; border-radius:4px; padding:4px 6px; font:inherit; width:100%; }
  label { display:block; color:var(--dim); font-size:12px; margin:6px 0 2px; }
  .row { display:flex; gap:8px; align-items:end; }
  .row > * { flex:1; }
  .message { min-height:1.4em; font-size:12px; margin-top:6px; color:var(--dim); overflow-wrap:anywhere; }
  .message.error { color:var(--bad); }
  #view-controls { display:flex; flex-wrap:wrap; gap:8px; margin-bottom:8px; align-items:center; }
  #view-controls .group { margin-left:auto; color:var(--dim); font-variant-numeric:tabular-nums; }
  #tiles { display:grid; grid-template-columns:repeat(auto-fill, minmax(min(300px, 100%), 1fr)); gap:8px; }
  .tile { position:relative; background:#000; border:1px solid var(--line); border-radius:4px; overflow:hidden; cursor:pointer; aspect-ratio: 4 / 3; }
  .tile img { width:100%; height:100%; object-fit:contain; display:block; }
  .tile .caption { position:absolute; left:0; right:0; bottom:0; background:rgba(0,0,0,.65); padding:3px 6px; font-size:12px;
                   display:flex; flex-wrap:wrap; gap:2px 10px; font-variant-numeric:tabular-nums; }
  .tile .caption .name { font-weight:600; }
  .tile .nosignal { display:none; position:absolute; inset:0; align-items:center; justify-content:center; color:var(--dim); }
  .tile.missing img, .tile img:not([src]) { visibility:hidden; }
  .tile.waiting .nosignal { display:flex; }
  .tile.missing .nosignal { display:flex; }
  .tile.missing { border-color:var(--bad); }
  #tiles.pip { display:block; position:relative; }
  #tiles.pip .tile.hero { width:100%; }
  #tiles.pip .tile:not(.hero) { display:inline-block; width:180px; margin:6px 6px 0 0; vertical-align:top; }
  .pressure-fair { color:var(--warn); } .pressure-serious, .pressure-critical, .pressure-shutdown { color:var(--bad); }
  table { width:100%; border-collapse:collapse; font-size:13px; }
  td, th { text-align:left; padding:3px 4px; border-bottom:1px solid var(--line); vertical-align:top; }
  th { color:var(--dim); font-weight:500; }
  tr.unreachable td { color:var(--bad); }
  tr.unreachable td.stale { color:var(--dim); font-style:italic; }
  .table-wrap { overflow-x:auto; }
  meter.mic-level { width:64px; height:10px; vertical-align:middle; }
  /* An empty meter is an outline, not a full grey bar. */
  meter.mic-level::-webkit-meter-bar { background:transparent; border:1px solid #3a424a; border-radius:2px; }
  .no-signal { color:var(--dim); }
  #rig-disk { color:var(--dim); }
  #take-state { font-variant-numeric:tabular-nums; margin-top:8px; }
  #events { list-style:none; margin:0; padding:0; max-height:320px; overflow:auto; font-size:12px; }
  #events li { padding:3px 0; border-bottom:1px solid var(--line); }
  #events li.serious { color:var(--bad); }
  #events .time { color:var(--dim); margin-right:6px; font-variant-numeric:tabular-nums; }
  #events .kind { color:var(--accent); margin-right:6px; }
  a { color:var(--accent); }
  /* A phone: one column, the take's controls straight under the tiles (two to a row), the rest below. */
  @media (max-width: 800px) {
    main { display:flex; flex-direction:column; gap:0; padding:8px; }
    main > div { display:contents; }
    #view { order:1; } #take { order:2; } #nodes-section { order:3; } #controls { order:4; } #takes-section { order:5; } #events-section { order:6; }
    #tiles { grid-template-columns:repeat(auto-fill, minmax(140px, 1fr)); gap:4px; }
    .tile .caption { font-size:10px; gap:0 6px; }
    #tiles.pip .tile:not(.hero) { width:calc(50% - 6px); }
    header { padding:6px 8px; }
  }
"""
}
