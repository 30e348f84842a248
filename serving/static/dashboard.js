"use strict";
// The live dashboard's script (served at /dashboard.js beside /dashboard): it reads the serving
// API with the analyst token from #token= (or the login form) every `every` seconds.
//
// The pipelines and their views come from GET /v1/views. Each view's panels follow from its
// measures' kinds (PANELS), so a new pipeline's page needs no code here. The web panel (#web)
// is a hand-made summary of the two views WEB_PANEL names; they are not drawn twice.
(function () {
  const params = new URLSearchParams(location.hash.slice(1));
  const every = Math.max(1, Number(params.get("every") || 3));
  let token = params.get("token") || localStorage.getItem("serving-token") || "";
  let updates = 0;
  document.getElementById("every").textContent = every;

  const ROWS = 10;                     // keys per table
  const MAX_N = 100;                   // the most keys /v1/top answers
  const QUANTILES = [0.5, 0.9, 0.99];  // the columns of a percentile table
  const IDLE_S = 60;                   // see speedState
  const WEB_PANEL = ["site_activity", "page_activity"];

  function $(id) { return document.getElementById(id); }
  function fmt(n) { return n === null || n === undefined ? "-" : Math.round(n).toLocaleString("en"); }
  function num(n) {  // a measure's value: whole above 100, else up to two decimals
    return n === null || n === undefined || Math.abs(n) >= 100 ? fmt(n) :
      n.toLocaleString("en", { maximumFractionDigits: 2 });
  }
  function hhmm(iso) { return iso ? iso.slice(11, 16) : "-"; }
  function total(values) {
    const present = values.filter((v) => v !== null && v !== undefined);
    return present.length ? present.reduce((a, v) => a + v, 0) : null;
  }

  function el(tag, className, text) {  // text only: names and keys are data, never markup
    const e = document.createElement(tag);
    if (className) { e.className = className; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function legend() { return $("legend").content.firstElementChild.cloneNode(true); }

  async function get(path) {
    const answer = await fetch(path, { headers: { Authorization: "Bearer " + token } });
    const body = await answer.json();
    if (answer.status === 401) { showLogin(body.message); throw new Error(body.message); }
    if (!answer.ok) { throw new Error(body.message || answer.statusText); }
    return body;
  }

  function url(route, query) {  // a list value repeats its parameter; null leaves it out
    const q = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      for (const v of [].concat(value)) {
        if (v !== null && v !== undefined) { q.append(name, v); }
      }
    }
    return `${route}?${q}`;
  }

  function showLogin(message) {
    $("app").hidden = true; $("login").hidden = false;
    if (message) { $("token-input").placeholder = message; }
  }

  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    token = $("token-input").value.trim();
    localStorage.setItem("serving-token", token);
    start();
  });

  function fillTable(tbody, items, cells) {
    tbody.replaceChildren();
    if (!items.length) {
      const tr = tbody.insertRow(); const td = tr.insertCell();
      td.colSpan = tbody.parentElement.tHead ? tbody.parentElement.tHead.rows[0].cells.length : 3;
      td.className = "sub"; td.textContent = "no data in this range";
      return;
    }
    for (const item of items) {
      const tr = tbody.insertRow();
      cells(item).forEach((value, i) => {
        const td = tr.insertCell();
        td.textContent = value;
        td.className = i === 0 ? "key" : "num";
        if (i === 0) { td.title = value; }
      });
    }
  }

  function table(columns) {
    const t = el("table");
    const head = t.createTHead().insertRow();
    columns.forEach((name, i) => {
      const th = el("th", i ? "num" : "", name); th.scope = "col"; head.append(th);
    });
    t.createTBody();
    return t;
  }

  // Bars per bucket over bands of the final (batch) and provisional (speed) periods, and the
  // batch boundary as a dashed line. `value` reads a bucket's number (null: unavailable).
  function drawChart(target, buckets, value, boundary, { label, lineId, width = 1000 } = {}) {
    const height = 260, left = 44, bottom = 22, top = 10;
    const n = Math.max(1, buckets.length);
    const max = Math.max(1, ...buckets.map((b) => value(b) || 0));
    const bar = (width - left) / n;
    const y = (v) => top + (height - top - bottom) * (1 - v / max);
    let svg = `<svg viewBox="0 0 ${width} ${height}" preserveAspectRatio="none" role="img"
      aria-label="${label}">`;
    for (const t of [0, 0.5, 1]) {
      const v = Math.round(max * t);
      svg += `<line x1="${left}" x2="${width}" y1="${y(v)}" y2="${y(v)}" stroke="#eef1f5"/>` +
             `<text x="${left - 6}" y="${y(v) + 4}" font-size="11" text-anchor="end"
               fill="#6b7385">${fmt(v)}</text>`;
    }
    let boundaryX = null;
    buckets.forEach((b, i) => {  // background bands: final (batch) vs provisional (speed)
      const x = left + i * bar;
      svg += `<rect class="band ${b.final ? "final" : "provisional"}" x="${x}" y="${top}"
        width="${bar}" height="${height - top - bottom}"
        fill="${b.final ? "#e4ecf7" : "#fdf6e3"}"/>`;
    });
    buckets.forEach((b, i) => {
      const x = left + i * bar, v = value(b), h = height - bottom - y(v || 0);
      const kind = b.final ? "final" : (b.source === "mixed" ? "mixed" : "provisional");
      const fill = b.final ? "var(--final)" : "var(--prov)";
      svg += `<rect class="bucket ${kind}" data-start="${b.start}" data-value="${v ?? ""}"
        x="${x + 0.5}" y="${y(v || 0)}" width="${Math.max(1, bar - 1)}" height="${Math.max(0, h)}"
        fill="${fill}"><title>${b.start}
        ${v === null ? "unavailable" : fmt(v)} (${kind})</title></rect>`;
      if (boundary && b.start === boundary) { boundaryX = x; }
      if (boundary && boundaryX === null && b.start > boundary && i > 0 &&
          buckets[i - 1].start < boundary) { boundaryX = x; }
      if (i % Math.ceil(n / (width / 85)) === 0 && x < width - 36) {
        svg += `<text x="${x}" y="${height - 6}" font-size="11" fill="#6b7385">` +
          `${hhmm(b.start)}</text>`;
      }
    });
    if (boundaryX !== null) {
      const leftOf = boundaryX > width * 0.7;  // the label on the side with room
      svg += `<line class="boundary-line" ${lineId ? `id="${lineId}"` : ""} x1="${boundaryX}"
        x2="${boundaryX}" y1="${top}" y2="${height - bottom}" stroke="#c0392b" stroke-width="2"
        stroke-dasharray="6 4"/>` +
        `<text x="${boundaryX + (leftOf ? -4 : 4)}" y="${top + 12}" font-size="12" fill="#c0392b"
          text-anchor="${leftOf ? "end" : "start"}" stroke="#fff" stroke-width="3"
          paint-order="stroke">batch boundary ${hhmm(boundary)}</text>`;
    }
    target.innerHTML = svg + "</svg>";
  }

  // A view's speed side in words. Idle is not "behind", however old the newest event: the query
  // has read everything (Kafka lag 0), still beats (heartbeat under IDLE_S old) and has beaten
  // for IDLE_S since its newest event without a newer one (a slow micro-batch beats only at
  // its end, and its Kafka lag was taken at its start: that one stays "behind").
  function speedState(fresh) {
    const lag = fresh.lag_s;
    if (fresh.status === "error") { return ["fresh-stale", `ERROR ${fresh.error}`]; }
    if (lag === null || lag === undefined) { return ["fresh-stale", "no progress yet"]; }
    const detail = `newest event ${hhmm(fresh.newest_event_time)}, ` +
      `kafka lag ${fresh.kafka_lag ?? "-"}`;
    if (lag < 15) { return ["fresh-ok", `${lag.toFixed(1)} s behind (${detail})`]; }
    // The answer's own clock (now = newest event time + lag), not the browser's.
    const now = Date.parse(fresh.newest_event_time) + lag * 1000;
    const beat = fresh.heartbeat_at ?
      Math.max(0, (now - Date.parse(fresh.heartbeat_at)) / 1000) : null;
    const beatText = beat === null ? "" : `, heartbeat ${beat.toFixed(0)} s ago`;
    const quiet = (Date.parse(fresh.heartbeat_at) - Date.parse(fresh.newest_event_time)) / 1000;
    if (fresh.kafka_lag === 0 && beat !== null && beat <= IDLE_S && quiet >= IDLE_S) {
      return ["fresh-idle", `idle, caught up (${detail}${beatText})`];
    }
    return [lag < 120 ? "fresh-slow" : "fresh-stale",
      `${lag.toFixed(1)} s behind (${detail}${beatText})`];
  }

  function showFreshness(answer, view) {
    const [style, text] = speedState(answer.freshness[view] || {});
    $("freshness").className = "pill " + style;
    $("freshness").textContent = `speed side: ${text}`;
    const boundary = answer.boundary[view];
    $("boundary").textContent = boundary ? `batch boundary: ${boundary.replace("T", " ")}` :
      "batch boundary: none yet (all speed)";
  }

  // -- the web panel: the collector pipeline's site and pages, by hand ------------------------

  async function refreshWeb(ctx) {
    const { since, granularity } = ctx;
    const [site, reach, pages, slowest] = await Promise.all([
      get(`/v1/timeseries?view=site_activity&start=${since}&end=now&granularity=${granularity}` +
          "&measure=events&measure=page_views&measure=visitors"),
      get(`/v1/reach?view=site_activity&start=${since}&end=now`),
      get(`/v1/top?view=page_activity&measure=page_views&n=10&start=${since}&end=now`),
      get("/v1/top?view=page_activity&measure=load_sketch&n=5&start=now-1m&end=now"),
    ]);
    const buckets = site.series[0].buckets;
    const minute = granularity === "minute";
    const now = buckets[buckets.length - 1] || {}, last = buckets[buckets.length - 2] || {};
    $("events-now").textContent = minute ? fmt(now.events) : "-";
    $("events-last").textContent = minute ? fmt(last.events) : "-";
    $("visitors-now").textContent = minute ? fmt(now.visitors) : "-";
    $("visitors-last").textContent = minute ? fmt(last.visitors) : "-";
    $("reach").textContent = fmt(reach.visitors);
    $("reach-bounds").textContent = `between ${fmt(reach.lower_bound)} and ` +
      `${fmt(reach.upper_bound)} (HLL, 2 sigma)`;
    const views = buckets.reduce((a, b) => a + b.page_views, 0);
    const final = buckets.filter((b) => b.final).reduce((a, b) => a + b.page_views, 0);
    $("views-total").textContent = fmt(views);
    $("views-final").textContent = fmt(final);
    $("views-prov").textContent = fmt(views - final);
    drawChart($("chart"), buckets, (b) => b.events, site.boundary.site_activity,
      { label: "events per bucket", lineId: "boundary-line" });
    showFreshness(site, "site_activity");
    fillTable($("top-pages").tBodies[0], pages.items, (i) => [i.key.path, fmt(i.value)]);
    fillTable($("slowest").tBodies[0], slowest.items,
      (i) => [i.key.path, fmt(i.value), fmt(i.samples)]);
  }

  // -- every other view: its panels from its measures' kinds -----------------------------------

  // A kind's panel; `together`: the view's measures of such kinds share one (their series over
  // the same keys). A kind missing here is named on the page, never silently left out.
  const PANELS = {
    count: { draw: seriesCards, together: true },
    sum: { draw: seriesCards, together: true },
    hll: { draw: distinctCard },
    kll: { draw: percentileCard },
    max: { draw: rankedCard },
    min: { draw: rankedCard },
  };

  function keyText(key) { return Object.values(key).join(" / "); }
  function keyParam(view, key) {  // one key column as it is, a wider key as a JSON array
    return view.keys.length === 1 ? key[view.keys[0]] :
      JSON.stringify(view.keys.map((k) => key[k]));
  }

  async function ask(ctx, route, query) {
    const answer = await get(url(route, { ...query, start: ctx.since, end: "now" }));
    ctx.answers.push(answer);
    return answer;
  }

  function card(view, measure, panel, width = "half") {
    const c = el("section", `card ${width}`);
    c.dataset.panel = panel; c.dataset.view = view.view;
    if (measure) { c.dataset.measure = measure.name; }
    return c;
  }

  function viewHead(view, unknown) {
    const head = el("div", "view-head");
    head.append(el("h2", "", view.view), el("span", "sub", view.description),
      el("span", "sub", view.constant_key ? "one key: the whole view" :
        `keys: ${view.keys.join(", ")}`));
    for (const m of unknown) {
      head.append(el("span", "note", `no panel for kind ${m.kind} (${m.name})`));
    }
    return head;
  }

  async function viewCards(view, ctx) {
    const groups = new Map(), unknown = [];
    for (const m of view.measures) {
      const panel = PANELS[m.kind];
      if (!panel) { unknown.push(m); continue; }
      const group = panel.together ? panel.draw : m;
      if (!groups.has(group)) { groups.set(group, { draw: panel.draw, measures: [] }); }
      groups.get(group).measures.push(m);
    }
    const drawn = await Promise.all([...groups.values()].map((g) => g.draw(view, g.measures, ctx)));
    return [viewHead(view, unknown), ...drawn.flat()];
  }

  // count and sum: one time series per measure, summed over the keys the first ranks highest
  // (all of them when fewer than ROWS), and a table of those keys' totals.
  async function seriesCards(view, measures, ctx) {
    const constant = Boolean(view.constant_key);
    const ranked = constant ? null :
      await ask(ctx, "/v1/top", { view: view.view, measure: measures[0].name, n: ROWS });
    const keys = constant ? [] : ranked.items.map((i) => i.key);
    const series = constant || keys.length ? await ask(ctx, "/v1/timeseries", {
      view: view.view, key: keys.map((k) => keyParam(view, k)),
      measure: measures.map((m) => m.name), granularity: ctx.granularity,
    }) : { series: [], boundary: {}, unavailable: null };
    const over = constant ? "" : keys.length < ROWS ? `all ${keys.length} keys` :
      `the top ${keys.length} keys by ${measures[0].name}`;
    const cards = measures.map((m) => seriesCard(view, m, series, over, ctx));
    if (!constant) { cards.push(keysCard(view, measures, keys, series)); }
    return cards;
  }

  function seriesCard(view, m, answer, over, ctx) {
    const first = answer.series.length ? answer.series[0].buckets : [];
    const buckets = first.map((b, i) => ({ ...b,
      value: total(answer.series.map((s) => s.buckets[i][m.name])) }));
    const all = total(buckets.map((b) => b.value)) || 0;
    const final = total(buckets.filter((b) => b.final).map((b) => b.value)) || 0;
    const c = card(view, m, "series");
    const stat = el("div", "sub");
    const number = el("span", "total", num(all)); number.dataset.total = all;
    stat.append(number, ` in range: ${num(final)} final, ${num(all - final)} provisional`);
    const chart = el("div", "chart");
    c.append(el("h3", "label", `${m.name} (${m.kind}) per ${ctx.granularity}`),
      el("p", "sub", m.description + (over ? ` Summed over ${over}.` : "")), stat, legend(), chart);
    if (answer.unavailable) { c.append(el("p", "note", answer.unavailable.message)); }
    if (!buckets.length) { chart.append(el("p", "sub", "no data in this range")); return c; }
    drawChart(chart, buckets, (b) => b.value, answer.boundary[view.view],
      { label: `${view.view} ${m.name} per ${ctx.granularity}: ${fmt(all)} in range`, width: 560 });
    return c;
  }

  function keysCard(view, measures, keys, answer) {
    const c = card(view, null, "keys");
    const t = table([view.keys.join(" / "), ...measures.map((m) => m.name)]);
    t.className = "pipeline-view"; t.dataset.view = view.view;
    const byKey = new Map(answer.series.map((s) => [JSON.stringify(s.key), s.buckets]));
    fillTable(t.tBodies[0], keys, (key) => {
      const buckets = byKey.get(JSON.stringify(key)) || [];
      return [keyText(key), ...measures.map((m) => num(total(buckets.map((b) => b[m.name]))))];
    });
    c.append(el("h3", "label", `Top keys, range (by ${measures[0].name})`), t);
    return c;
  }

  function errorText(reach) {  // a distinct count's 2-sigma bounds, as said and as a share
    if (reach.visitors === null) { return "unavailable"; }
    const spread = Math.max(reach.upper_bound - reach.visitors, reach.visitors - reach.lower_bound);
    const share = reach.visitors ? (100 * spread / reach.visitors).toFixed(1) : "0.0";
    return `±${share}% (${fmt(reach.lower_bound)} to ${fmt(reach.upper_bound)})`;
  }

  // hll: distinct counts over the range with their error (2-sigma bounds, from /v1/reach,
  // which answers a view's first hll measure), per key ranked by the estimate.
  async function distinctCard(view, [m], ctx) {
    const bounded = view.measures.find((x) => x.kind === "hll") === m;
    const c = card(view, m, "distinct");
    c.append(el("h3", "label", `${m.name} (hll): distinct, range`), el("p", "sub", m.description));
    const reachOf = (key) =>
      ask(ctx, "/v1/reach", { view: view.view, key: key && keyParam(view, key) });
    if (view.constant_key && bounded) {
      const reach = await reachOf(null);
      const number = el("div", "big", fmt(reach.visitors));
      c.append(number, el("p", "sub", `${errorText(reach)}: HLL estimate, 2 sigma`));
      return c;
    }
    const ranked = await ask(ctx, "/v1/top", { view: view.view, measure: m.name, n: ROWS });
    const reaches = bounded ? await Promise.all(ranked.items.map((i) => reachOf(i.key))) : [];
    const t = table([view.keys.join(" / "), "distinct", "error (2 sigma)"]);
    const rows = ranked.items.map((item, i) => ({ item, reach: reaches[i] }));
    fillTable(t.tBodies[0], rows, ({ item, reach }) => reach ?
      [keyText(item.key), fmt(reach.visitors), errorText(reach)] :
      [keyText(item.key), fmt(item.value), "HLL estimate (bounds: /v1/reach, first hll only)"]);
    c.append(t);
    return c;
  }

  // kll: the QUANTILES of each key's values over the range, keys ranked by the first.
  async function percentileCard(view, [m], ctx) {
    const answers = await Promise.all(QUANTILES.map((q) =>
      ask(ctx, "/v1/top", { view: view.view, measure: m.name, quantile: q, n: MAX_N })));
    const byKey = answers.map((a) => new Map(a.items.map((i) => [JSON.stringify(i.key), i])));
    const t = table([view.keys.join(" / "), ...answers.map((a) => a.rank), "values"]);
    fillTable(t.tBodies[0], answers[0].items.slice(0, ROWS), (item) => [keyText(item.key),
      ...byKey.map((found) => num((found.get(JSON.stringify(item.key)) || {}).value)),
      fmt(item.samples)]);
    const c = card(view, m, "percentiles");
    c.append(el("h3", "label", `${m.name} (kll): percentiles, range`),
      el("p", "sub", m.description), t);
    return c;
  }

  // max, min: the keys ranked by the measure over the range.
  async function rankedCard(view, [m], ctx) {
    const ranked = await ask(ctx, "/v1/top", { view: view.view, measure: m.name, n: ROWS });
    const t = table([view.keys.join(" / "), ranked.rank]);
    fillTable(t.tBodies[0], ranked.items, (i) => [keyText(i.key), num(i.value)]);
    const c = card(view, m, "ranked");
    c.append(el("h3", "label", `${m.name} (${m.kind}), range`), el("p", "sub", m.description), t);
    return c;
  }

  // -- the page -------------------------------------------------------------------------------

  let catalog = [];

  function pipelineViews() { return catalog.filter((v) => v.pipeline === $("pipeline").value); }

  async function loadCatalog() {
    catalog = await get("/v1/views");
    const names = [...new Set(catalog.map((v) => v.pipeline))];
    const wanted = params.get("pipeline") ||
      (catalog.find((v) => v.view === WEB_PANEL[0]) || catalog[0] || {}).pipeline;
    $("pipeline").replaceChildren(...names.map((name) => new Option(name, name)));
    if (names.includes(wanted)) { $("pipeline").value = wanted; }
  }

  async function refresh() {
    const minutes = Number($("range").value);
    const granularity = minutes > 2880 ? "day" : minutes > 180 ? "hour" : "minute";
    const ctx = { since: `now-${minutes}m`, granularity, answers: [] };
    const views = pipelineViews();
    const web = WEB_PANEL.every((name) => views.some((v) => v.view === name));
    const derived = views.filter((v) => !(web && WEB_PANEL.includes(v.view)));
    $("web").hidden = !web;
    $("title").textContent = web ? "Web activity, live" : `${$("pipeline").value}, live`;
    try {
      const [cards] = await Promise.all([
        Promise.all(derived.map((v) => viewCards(v, ctx))), web ? refreshWeb(ctx) : null]);
      $("generic").replaceChildren(...cards.flat());
      const first = derived.length && ctx.answers.find((a) => a.view === derived[0].view);
      if (!web && first) { showFreshness(first, first.view); }  // a pipeline's views: one query
      updates += 1;
      $("updated").textContent = updates;
      $("updated-at").textContent = new Date().toISOString().slice(11, 19) + "Z";
      $("error").textContent = "";
    } catch (error) {
      $("error").textContent = String(error.message || error);
    }
  }

  let timer = null;
  async function start() {
    if (!token) { showLogin(); return; }
    $("login").hidden = true; $("app").hidden = false;
    try { await loadCatalog(); } catch (error) { $("error").textContent = String(error.message); }
    refresh();
    if (timer === null) { timer = setInterval(refresh, every * 1000); }
  }
  document.querySelector("#web [data-legend]").replaceWith(legend());
  $("range").addEventListener("change", refresh);
  $("pipeline").addEventListener("change", refresh);
  start();
})();
