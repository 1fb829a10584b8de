/* The ATP HTML report: draws the page from the JSON document in #atp-data.
 *
 * Everything in that document may come from an untrusted agent. The rules of this script:
 * - nodes are made with document.createElement and filled with textContent (text nodes) only;
 *   no string is ever parsed as HTML, and no data is ever evaluated as code;
 * - an attribute is set only from a fixed list (class, title, aria-*, data-*, colspan, type),
 *   and a link's href only after the URL parses with the scheme http: or https:;
 * - styles are set through the CSSOM (element.style), which the page's CSP allows.
 * Inlined into the page; its SHA-256 is in the page's CSP. It must not contain the sequences
 * that end a script element or open an HTML comment.
 */
(function () {
  "use strict";

  var CHUNK = 500; // events rendered at a time in a trace
  var CLIP = 4000; // characters of one event field shown before "show all"
  var SHOW_ALL_STEP = 1000; // events rendered per task by "show all"
  var STATUS_ORDER = { error: 0, failed: 1, passed: 2, skipped: 3 };
  var EVENT_LABELS = {
    tool_call: "tool call",
    llm_request: "LLM request",
    reasoning: "reasoning",
    state_change: "state change",
    artifact_created: "artifact",
    error: "error",
    progress: "progress"
  };
  var EVENT_COLOURS = {
    tool_call: "#1f5fbf",
    llm_request: "#7a3fc2",
    reasoning: "#0e7c7b",
    state_change: "#52627a",
    artifact_created: "#067647",
    error: "#b42318",
    progress: "#b57f08",
    other: "#8a93a3"
  };
  var METRIC_LABELS = {
    total_tokens: "total tokens",
    input_tokens: "input tokens",
    output_tokens: "output tokens",
    total_steps: "steps",
    tool_calls: "tool calls",
    llm_calls: "LLM calls",
    wall_time_seconds: "wall time (s)",
    cost_usd: "cost (USD)"
  };

  // --- DOM helpers: text only ------------------------------------------------------------

  /* An element with a class and children: strings become text nodes; null, undefined and
     false are left out; arrays are flattened. */
  function el(tag, className) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }

  function add(parent, child) {
    if (child === null || child === undefined || child === false) return parent;
    if (Array.isArray(child)) {
      for (var i = 0; i < child.length; i++) add(parent, child[i]);
    } else if (typeof child === "object" && child.nodeType) {
      parent.appendChild(child);
    } else {
      parent.appendChild(document.createTextNode(String(child)));
    }
    return parent;
  }

  var SAFE_ATTRIBUTES = /^(title|colspan|type|role|tabindex|aria-[a-z]+|data-[a-z-]+)$/;

  function attr(node, name, value) {
    if (!SAFE_ATTRIBUTES.test(name)) throw new Error("attribute not allowed: " + name);
    node.setAttribute(name, String(value));
    return node;
  }

  /* The URL itself when it is an absolute http(s) URL, else null. */
  function safeHref(url) {
    if (typeof url !== "string" || !/^https?:\/\//i.test(url)) return null;
    try {
      var parsed = new URL(url);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (e) {
      return null;
    }
  }

  function link(url, label) {
    var href = safeHref(url);
    if (href === null) return document.createTextNode(label);
    var a = el("a", null, label);
    a.href = href;
    a.rel = "noopener noreferrer nofollow";
    a.target = "_blank";
    return a;
  }

  function button(label, onClick, className) {
    var b = el("button", className || null, label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  /* <details> whose body is made the first time it is opened. */
  function lazyDetails(className, summary, build, open) {
    var details = el("details", className);
    details.appendChild(el("summary", null, summary));
    var built = false;
    function ensure() {
      if (details.open && !built) {
        built = true;
        build(details);
      }
    }
    details.addEventListener("toggle", ensure);
    if (open) {
      details.open = true;
      ensure();
    }
    return details;
  }

  function facts(pairs) {
    var dl = el("dl", "facts");
    pairs.forEach(function (pair) {
      if (!pair || pair[1] === null || pair[1] === undefined || pair[1] === "") return;
      dl.appendChild(el("dt", null, pair[0]));
      dl.appendChild(el("dd", null, pair[1]));
    });
    return dl;
  }

  function table(className, headers, rows) {
    var t = el("table", className);
    var head = el("tr");
    headers.forEach(function (h, i) {
      head.appendChild(el("th", i > 0 && rows.numeric && rows.numeric[i] ? "num" : null, h));
    });
    t.appendChild(el("thead", null, head));
    var body = el("tbody");
    rows.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (cell, i) {
        tr.appendChild(el("td", rows.numeric && rows.numeric[i] ? "num" : null, cell));
      });
      body.appendChild(tr);
    });
    t.appendChild(body);
    return el("div", "table-wrap", t);
  }

  // --- formatting -----------------------------------------------------------------------------

  function isNum(v) {
    return typeof v === "number" && isFinite(v);
  }

  function fixed(v, digits) {
    return isNum(v) ? v.toFixed(digits) : "—";
  }

  function percent(v) {
    return isNum(v) ? (v * 100).toFixed(1).replace(/\.0$/, "") + "%" : "—";
  }

  function seconds(v) {
    if (!isNum(v)) return "—";
    if (v < 60) return v.toFixed(2) + "s";
    var minutes = Math.floor(v / 60);
    var rest = (v - minutes * 60).toFixed(1);
    return minutes + "m" + (rest.length < 4 ? "0" : "") + rest + "s";
  }

  function sizeText(n) {
    if (!isNum(n)) return "";
    if (n < 1024) return n + " bytes";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
    return (n / (1024 * 1024)).toFixed(1) + " MiB";
  }

  function plural(n, word) {
    return n.toLocaleString("en") + " " + word + (n === 1 ? "" : "s");
  }

  /* Any JSON value as text: strings as they are, anything else as indented JSON. */
  function asText(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "string") return v;
    if (typeof v === "number" || typeof v === "boolean") return String(v);
    try {
      return JSON.stringify(v, null, 2);
    } catch (e) {
      return String(v);
    }
  }

  function when(iso) {
    if (typeof iso !== "string") return "";
    return iso.replace("T", " ").replace(/(\d\d:\d\d:\d\d)\.\d+/, "$1").replace(/(Z|\+00:00)$/, " UTC");
  }

  var TIME = /^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)?$/i;

  /* Milliseconds since the epoch of an RFC 3339 time (microseconds kept), or NaN. */
  function parseTime(iso) {
    var m = typeof iso === "string" ? TIME.exec(iso) : null;
    if (!m) return NaN;
    var ms = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
    if (m[7]) ms += Number("0." + m[7]) * 1000;
    if (m[8] && m[8].toUpperCase() !== "Z") {
      var sign = m[8][0] === "-" ? -1 : 1;
      var digits = m[8].replace(":", "");
      ms -= sign * (Number(digits.slice(1, 3)) * 60 + Number(digits.slice(3, 5))) * 60000;
    }
    return ms;
  }

  function statusBadge(status) {
    var known = Object.prototype.hasOwnProperty.call(STATUS_ORDER, status);
    return el("span", "badge status-" + (known ? status : "skipped"), String(status));
  }

  /* The badges of a test's reliability: flaky (its runs disagree), quarantined (a failure is
     reported but does not fail the run). */
  function flagBadges(test) {
    var badges = [];
    if (test.flaky === true) badges.push(attr(el("span", "badge flag-flaky", "flaky"), "title", "its runs disagree: some passed, some failed"));
    if (test.quarantined === true) badges.push(attr(el("span", "badge flag-quarantined", "quarantined"), "title", "the suite quarantines it: a failure is reported but does not fail the run"));
    return badges;
  }

  function retriesOf(test) {
    var count = 0;
    (test.runs || []).forEach(function (run) { count += Array.isArray(run.retries) ? run.retries.length : 0; });
    return count;
  }

  function usd(v) {
    if (!isNum(v)) return "—";
    return "$" + (v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(4) : v.toFixed(2));
  }

  /* What the run spent of its budget: "$0.42 of $1.00 · 1,200 of 5,000 tokens". */
  function budgetText(b) {
    var cost = usd(b.spent_cost_usd || 0) + (isNum(b.max_cost_usd) ? " of " + usd(b.max_cost_usd) : "");
    var tokens = (b.spent_tokens || 0).toLocaleString("en") + (isNum(b.max_tokens) ? " of " + b.max_tokens.toLocaleString("en") : "") + " tokens";
    return cost + " · " + tokens;
  }

  function shardText(shard) {
    var how = shard.basis ? "balanced by the durations of run " + String(shard.basis) : "shared by count";
    return shard.index + " of " + shard.count + " (" + how + ")";
  }

  function passRule(rule) {
    if (!rule || !rule.rule || rule.rule === "all") return "every run passes";
    if (rule.rule === "pass_rate") return "at least " + percent(rule.threshold || 0) + " of the runs pass";
    if (rule.rule === "min_score") return "the mean score is at least " + fixed(rule.threshold || 0, 1);
    return asText(rule);
  }

  /* A <pre> of text, cut at `limit` characters with a button that shows the rest. */
  function clipped(textValue, limit, className) {
    var pre = el("pre", className || null);
    if (textValue.length <= limit) {
      pre.textContent = textValue;
      return pre;
    }
    pre.textContent = textValue.slice(0, limit);
    var box = el("div", null, pre);
    var more = el(
      "div",
      "clip-note",
      "showing " + limit.toLocaleString("en") + " of " + textValue.length.toLocaleString("en") + " characters ",
      button("show all", function () {
        pre.textContent = textValue;
        more.remove();
      })
    );
    box.appendChild(more);
    return box;
  }

  // --- markdown: a safe subset ----------------------------------------------------------------
  // Headings, paragraphs, emphasis, code (inline and fenced), lists, block quotes, rules and
  // links whose URL is http(s); anything else stays text. No recursion on nested input.

  var LINK = /\[([^[\]\n]{0,2000})\]\(([^()\s]{1,4000})\)/y;

  function inline(source, parent, depth) {
    var buffer = "";
    var i = 0;
    function flush() {
      if (buffer) parent.appendChild(document.createTextNode(buffer));
      buffer = "";
    }
    while (i < source.length) {
      var c = source[i];
      if (c === "`") {
        var close = source.indexOf("`", i + 1);
        if (close > i + 1) {
          flush();
          parent.appendChild(el("code", null, source.slice(i + 1, close)));
          i = close + 1;
          continue;
        }
      } else if (depth < 4 && (c === "*" || c === "_")) {
        // cheap tests first: each delimiter is searched for at most once per failed opening
        var strong = source[i + 1] === c;
        var mark = strong ? c + c : c;
        var start = i + mark.length;
        var opens = start < source.length && !/\s/.test(source[start]) && !(c === "_" && i > 0 && /\w/.test(source[i - 1]));
        var end = opens ? source.indexOf(mark, start) : -1;
        if (end > start) {
          flush();
          var node = el(strong ? "strong" : "em");
          inline(source.slice(start, end), node, depth + 1);
          parent.appendChild(node);
          i = end + mark.length;
          continue;
        }
      } else if (c === "[") {
        LINK.lastIndex = i;
        var m = LINK.exec(source);
        if (m) {
          flush();
          var href = safeHref(m[2]);
          if (href === null) {
            buffer = m[0]; // not a web link: shown as the text it is
            flush();
          } else {
            var a = link(href, "");
            inline(m[1], a, depth + 1);
            parent.appendChild(a);
          }
          i += m[0].length;
          continue;
        }
      }
      buffer += c;
      i++;
    }
    flush();
    return parent;
  }

  function headingOf(line) {
    var m = /^ {0,3}(#{1,6})(?:[ \t](.*))?$/.exec(line);
    if (!m) return null;
    var textValue = (m[2] || "").trim();
    var cut = textValue.length;
    while (cut > 0 && textValue[cut - 1] === "#") cut--;
    if (cut === 0 || textValue[cut - 1] === " ") textValue = textValue.slice(0, cut).trim();
    return { level: m[1].length, text: textValue };
  }

  function isRule(line) {
    var compact = line.replace(/[ \t]/g, "");
    if (compact.length < 3 || line.search(/\S/) > 3) return false;
    var ch = compact[0];
    if (ch !== "-" && ch !== "*" && ch !== "_") return false;
    for (var i = 1; i < compact.length; i++) if (compact[i] !== ch) return false;
    return true;
  }

  var ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
  var FENCE = /^ {0,3}(`{3,}|~{3,})/;
  var QUOTE = /^ {0,3}>[ ]?(.*)$/;

  function renderMarkdown(source) {
    var root = el("div", "markdown");
    var lines = source.replace(/\r\n?/g, "\n").split("\n");
    var paragraph = [];
    function flushParagraph() {
      if (paragraph.length) root.appendChild(inline(paragraph.join(" "), el("p"), 0));
      paragraph = [];
    }
    var i = 0;
    while (i < lines.length) {
      var line = lines[i];
      var fence = FENCE.exec(line);
      if (fence) {
        flushParagraph();
        var marker = fence[1];
        var code = [];
        i++;
        while (i < lines.length && lines[i].trim().indexOf(marker) !== 0) code.push(lines[i++]);
        i++; // the closing fence (or the end)
        root.appendChild(el("pre", null, el("code", null, code.join("\n"))));
        continue;
      }
      if (!line.trim()) {
        flushParagraph();
        i++;
        continue;
      }
      var heading = headingOf(line);
      if (heading) {
        flushParagraph();
        root.appendChild(inline(heading.text, el("h" + heading.level), 0));
        i++;
        continue;
      }
      if (isRule(line)) {
        flushParagraph();
        root.appendChild(el("hr"));
        i++;
        continue;
      }
      var item = ITEM.exec(line);
      if (item) {
        flushParagraph();
        var ordered = /\d/.test(item[1][0]);
        var list = el(ordered ? "ol" : "ul");
        if (ordered && parseInt(item[1], 10) !== 1) list.start = parseInt(item[1], 10);
        while (i < lines.length) {
          item = ITEM.exec(lines[i]);
          if (!item || /\d/.test(item[1][0]) !== ordered) break;
          var itemText = item[2];
          i++;
          // indented lines that are not items themselves continue the item
          while (i < lines.length && /^[ \t]+\S/.test(lines[i]) && !ITEM.exec(lines[i])) itemText += " " + lines[i++].trim();
          list.appendChild(inline(itemText, el("li"), 0));
        }
        root.appendChild(list);
        continue;
      }
      var quote = QUOTE.exec(line);
      if (quote) {
        flushParagraph();
        var quoted = [];
        while (i < lines.length && (quote = QUOTE.exec(lines[i]))) {
          quoted.push(quote[1]);
          i++;
        }
        root.appendChild(el("blockquote", null, inline(quoted.join(" "), el("p"), 0)));
        continue;
      }
      paragraph.push(line.trim());
      i++;
    }
    flushParagraph();
    return root;
  }

  // --- the data -------------------------------------------------------------------------------

  var DATA = JSON.parse(document.getElementById("atp-data").textContent);
  var R = DATA.results;
  var VIEWS = DATA.runs || [];
  var app = document.getElementById("app");
  var entries = []; // one per test: {test, index, row, detail, open, haystack}

  // --- header and summary ---------------------------------------------------------------------

  function failingRegressions(baseline) {
    if (!baseline || baseline.fail_on_regression === false) return 0;
    return (baseline.correction === "none" ? baseline.regressions : baseline.regressions_holm) || 0;
  }

  function renderHeader() {
    var s = R.summary || {};
    var problems = (R.problems || []).length;
    var failing = (s.failed || 0) + (s.errors || 0) - (s.quarantined || 0); // quarantined failures do not fail the run
    var ok = failing <= 0 && !s.incomplete && !problems && !failingRegressions(R.baseline);
    var verdict = R.interrupted ? "interrupted" : ok ? "passed" : "failed";
    var verdictClass = verdict === "passed" ? "status-passed" : verdict === "failed" ? "status-failed" : "status-error";
    app.appendChild(el("h1", null, "ATP report", el("span", "verdict " + verdictClass, verdict)));
    app.appendChild(el("div", "subtitle", String(R.suite), " · ", String(R.agent), " · run ", String(R.run_id)));

    var cards = el("div", "cards");
    [
      ["tests", s.total, ""],
      ["passed", s.passed, "passed"],
      ["failed", s.failed, "failed"],
      ["errors", s.errors, "error"],
      ["skipped", s.skipped, "skipped"],
      ["runs", s.runs, ""],
      s.flaky ? ["flaky", s.flaky, "flaky"] : null,
      s.quarantined ? ["quarantined failures", s.quarantined, "quarantined"] : null,
      s.retries ? ["retries", s.retries, ""] : null
    ].forEach(function (card) {
      if (!card) return;
      cards.appendChild(el("div", "card " + card[2], el("div", "value", String(card[1] || 0)), el("div", "label", card[0])));
    });
    app.appendChild(cards);
    renderReliabilityNotices(s);

    var stopped = R.stopped_by ? "stopped by " + R.stopped_by : R.interrupted ? "interrupted" : null;
    app.appendChild(
      facts([
        ["Suite", R.suite],
        ["Suite file", R.suite_file],
        ["Agent", R.agent + (R.agent_type ? " (" + R.agent_type + ")" : "")],
        ["Run id", R.run_id],
        ["Started", when(R.started_at)],
        ["Finished", when(R.finished_at)],
        ["Duration", seconds(R.duration_seconds)],
        ["Not completed", stopped],
        ["Incomplete tests", s.incomplete ? String(s.incomplete) : null],
        ["Deselected", s.deselected ? String(s.deselected) : null],
        ["Shard", R.shard ? shardText(R.shard) : null],
        ["Budget", R.budget ? budgetText(R.budget) : null],
        ["Budget exceeded", R.budget && R.budget.exceeded ? String(R.budget.exceeded) : null]
      ])
    );
    renderSuiteStatistics();
    renderBaseline();
    renderProblems();
  }

  /* What the summary's counts alone do not say: a budget that stopped the run, quarantined
     failures that do not fail it, the tests whose runs disagree. */
  function renderReliabilityNotices(s) {
    if (R.stopped_by === "budget") {
      var notRun = R.tests.filter(function (t) { return t.status === "skipped" && typeof t.skip_reason === "string" && t.skip_reason.indexOf("not run: BUDGET_EXCEEDED") === 0; }).length;
      var exceeded = R.budget && R.budget.exceeded ? String(R.budget.exceeded) : "the budget was spent";
      app.appendChild(el("div", "notice bad budget-exceeded", "BUDGET_EXCEEDED: " + exceeded + "; " + plural(notRun, "test") + " not run — the suite is incomplete."));
    }
    var held = R.tests.filter(function (t) { return t.quarantined === true; });
    if (held.length) {
      var list = [];
      held.forEach(function (t, i) { list.push(i ? ", " : "", testButton(t.id), " (" + String(t.status) + ")"); });
      app.appendChild(el("div", "notice warn quarantined", "Quarantined: ", list, ". Their failures are reported but do not fail the run" + (s.quarantined ? " (" + plural(s.quarantined, "failure") + " here)." : ".")));
    }
    var codes = s.error_codes && typeof s.error_codes === "object" ? Object.keys(s.error_codes) : [];
    if (codes.length) {
      var counted = codes.map(function (code) { return code + " " + String(s.error_codes[code]); }).join(", ");
      app.appendChild(el("div", "notice bad error-codes", "Error codes of the runs that did not pass: " + counted + "."));
    }
    var flaky = R.tests.filter(function (t) { return t.flaky === true; });
    if (flaky.length) {
      var names = [];
      flaky.forEach(function (t, i) { names.push(i ? ", " : "", testButton(t.id)); });
      app.appendChild(el("div", "notice warn flaky", "Flaky (their runs disagree: some passed, some failed): ", names, "."));
    }
  }

  function testButton(id) {
    var index = -1;
    for (var i = 0; i < R.tests.length; i++) {
      if (R.tests[i].id === id) {
        index = i;
        break;
      }
    }
    if (index < 0) return document.createTextNode(id);
    return button(id, function () {
      openTest(index);
    }, "linkish");
  }

  function kTable(label, values) {
    var keys = Object.keys(values || {});
    if (!keys.length) return null;
    return [label, keys.map(function (k) { return "k=" + k + ": " + percent(values[k]); }).join(" · ")];
  }

  function renderSuiteStatistics() {
    var st = R.statistics;
    if (!st || !st.score) return;
    app.appendChild(el("h2", null, "Suite statistics"));
    var score = st.score;
    app.appendChild(
      facts([
        ["Mean score", fixed(score.mean, 1) + " over " + plural(score.n, "test")],
        ["CI 95", score.ci_95 ? fixed(score.ci_95[0], 1) + " – " + fixed(score.ci_95[1], 1) : "—"],
        ["Std", fixed(score.std, 2)],
        ["Range", fixed(score.min, 1) + " – " + fixed(score.max, 1)],
        kTable("pass@k", st.pass_at_k),
        kTable("pass^k", st.pass_hat_k)
      ])
    );
    if (st.unstable && st.unstable.length) {
      app.appendChild(el("p", null, "Unstable tests (coefficient of variation 0.15 or more):"));
      var ul = el("ul", "plain");
      st.unstable.forEach(function (id) { ul.appendChild(el("li", null, testButton(id))); });
      app.appendChild(ul);
    }
  }

  function renderBaseline() {
    var b = R.baseline;
    if (!b) return;
    app.appendChild(el("h2", null, "Baseline"));
    var failing = failingRegressions(b);
    if (failing) app.appendChild(el("div", "notice bad", "Regressions that fail this run: " + failing + "."));
    app.appendChild(
      facts([
        ["File", b.file],
        ["Made", when(b.created_at)],
        ["Compared", plural(b.compared || 0, "test")],
        ["Regressions", String(b.regressions || 0) + " (" + (b.regressions_holm || 0) + " after Holm's correction)"],
        ["Improvements", String(b.improvements || 0) + " (" + (b.improvements_holm || 0) + " after Holm's correction)"],
        ["Correction", b.correction || "holm"],
        ["Not in this run", (b.not_in_run || []).join(", ")]
      ])
    );
    (b.problems || []).forEach(function (p) { app.appendChild(el("div", "notice warn", p)); });
    var rows = [];
    R.tests.forEach(function (t) {
      var c = t.baseline;
      if (!c || (c.verdict !== "regression" && c.verdict_holm !== "regression")) return;
      rows.push([
        testButton(t.id),
        c.verdict,
        c.verdict_holm || "—",
        fixed(c.baseline_mean, 1),
        fixed(c.current_mean, 1),
        isNum(c.delta) ? (c.delta >= 0 ? "+" : "") + c.delta.toFixed(1) : "—",
        isNum(c.p_value) ? c.p_value.toPrecision(3) : "—",
        isNum(c.p_holm) ? c.p_holm.toPrecision(3) : "—"
      ]);
    });
    if (rows.length) {
      rows.numeric = [false, false, false, true, true, true, true, true];
      app.appendChild(el("h3", null, "Regressions"));
      app.appendChild(table("compact", ["Test", "Verdict", "After Holm", "Baseline", "Now", "Δ", "p", "p (Holm)"], rows));
    }
  }

  function renderProblems() {
    var problems = R.problems || [];
    var failures = R.plugin_failures || [];
    if (problems.length) {
      app.appendChild(el("h2", null, "Problems"));
      var ul = el("ul", "plain");
      problems.forEach(function (p) { ul.appendChild(el("li", null, p)); });
      app.appendChild(ul);
    }
    if (failures.length) {
      app.appendChild(el("h2", null, "Plugin failures"));
      failures.forEach(function (f) {
        var box = el("div", "notice bad", el("strong", null, String(f.plugin)), " in ", el("code", null, String(f.where)), ": ", String(f.message));
        if (f.traceback) {
          box.appendChild(lazyDetails(null, "traceback", function (d) { d.appendChild(clipped(f.traceback, 20000)); }));
        }
        app.appendChild(box);
      });
    }
  }

  // --- the test table -------------------------------------------------------------------------

  var COLUMNS = [
    { key: null, label: "", className: "col-open" },
    { key: "id", label: "Test", className: "col-id" },
    { key: "status", label: "Status", className: "col-status" },
    { key: "score", label: "Score", className: "col-score num" },
    { key: "runs", label: "Runs", className: "col-runs num" },
    { key: "duration", label: "Duration", className: "col-duration num" },
    { key: null, label: "Tags", className: "col-tags" }
  ];

  var SORTERS = {
    id: function (a, b) { return a.test.id < b.test.id ? -1 : a.test.id > b.test.id ? 1 : 0; },
    status: function (a, b) { return (STATUS_ORDER[a.test.status] || 0) - (STATUS_ORDER[b.test.status] || 0); },
    score: function (a, b) { return scoreOf(a.test) - scoreOf(b.test); },
    runs: function (a, b) { return (a.test.runs || []).length - (b.test.runs || []).length; },
    duration: function (a, b) { return (a.test.duration_seconds || 0) - (b.test.duration_seconds || 0); }
  };

  function scoreOf(test) {
    return (test.runs || []).length && isNum(test.score) ? test.score : -1;
  }

  /* Why a test did not pass, in a line: its first run error or failed check (said to be
     quarantined when the suite quarantines the test). */
  function whyLine(test) {
    if (test.status === "skipped") return test.skip_reason ? "skipped: " + test.skip_reason : "skipped";
    if (test.status === "passed") return null;
    var why = firstFailure(test);
    return why !== null && test.quarantined === true ? "quarantined: " + why : why;
  }

  function firstFailure(test) {
    var runs = test.runs || [];
    for (var i = 0; i < runs.length; i++) {
      if (runs[i].error) return (runs[i].error_code ? String(runs[i].error_code) + ": " : "") + String(runs[i].error);
      var checks = runs[i].checks || [];
      for (var j = 0; j < checks.length; j++) {
        if (!checks[j].passed && !checks[j].skipped) return checks[j].name + ": " + checks[j].message;
      }
    }
    return null;
  }

  function haystackOf(test) {
    var parts = [test.id, test.name, test.description || "", test.skip_reason || "", (test.tags || []).join(" ")];
    if (test.flaky === true) parts.push("flaky");
    if (test.quarantined === true) parts.push("quarantined");
    (test.runs || []).forEach(function (run) {
      if (run.error) parts.push(run.error);
      if (run.error_code) parts.push(String(run.error_code));
      (run.checks || []).forEach(function (c) {
        if (!c.passed) parts.push(c.name, c.message);
        if (c.skipped) parts.push("skipped");
      });
    });
    return parts.join("\n").toLowerCase();
  }

  function buildRow(entry) {
    var t = entry.test;
    var runs = (t.runs || []).length;
    var tr = el("tr", "test-row");
    attr(tr, "data-index", entry.index);
    attr(tr, "data-status", t.status);
    var expander = el("button", "expander", "▸");
    expander.type = "button";
    attr(expander, "aria-expanded", "false");
    attr(expander, "aria-label", "details of the test");
    entry.expander = expander;
    var idCell = el("td", "col-id", el("span", "mono test-id", String(t.id)));
    if (t.name && t.name !== t.id) idCell.appendChild(el("span", "name", String(t.name)));
    var why = whyLine(t);
    if (why) idCell.appendChild(el("span", "name why", why.length > 200 ? why.slice(0, 200) + "…" : why));
    var runsText = String(runs);
    if (t.status !== "skipped" && t.planned_runs && t.planned_runs !== runs) runsText += "/" + t.planned_runs;
    var tags = el("td", "col-tags");
    (t.tags || []).forEach(function (tag) { tags.appendChild(el("span", "tag", String(tag))); });
    var regression = t.baseline && (t.baseline.verdict === "regression" || t.baseline.verdict_holm === "regression");
    tr.appendChild(el("td", "col-open", expander));
    tr.appendChild(idCell);
    tr.appendChild(el("td", "col-status", statusBadge(t.status), regression ? el("span", "badge status-failed", "regression") : null, flagBadges(t)));
    tr.appendChild(el("td", "col-score num", runs ? fixed(t.score, 1) : "—"));
    tr.appendChild(el("td", "col-runs num", runsText));
    var duration = el("td", "col-duration num", runs ? seconds(t.duration_seconds) : "—");
    if (runs > 1) duration.title = "the total of its " + runs + " runs; " + seconds(t.duration_seconds / runs) + " per run";
    tr.appendChild(duration);
    tr.appendChild(tags);
    tr.addEventListener("click", function (event) {
      if (event.target.closest && event.target.closest("a")) return;
      toggleTest(entry);
    });
    entry.row = tr;
    return tr;
  }

  function toggleTest(entry, forceOpen) {
    var open = forceOpen === true ? true : !entry.open;
    entry.open = open;
    entry.row.classList.toggle("open", open);
    attr(entry.expander, "aria-expanded", open ? "true" : "false");
    entry.expander.textContent = open ? "▾" : "▸";
    if (open && !entry.detail) {
      var td = el("td", null, renderTestDetail(entry.test, entry.index));
      attr(td, "colspan", COLUMNS.length);
      entry.detail = el("tr", "test-detail", td);
      entry.row.parentNode.insertBefore(entry.detail, entry.row.nextSibling);
    }
    if (entry.detail) entry.detail.hidden = !open || entry.row.hidden;
  }

  var filters = {};

  function renderTests() {
    app.appendChild(el("h2", null, "Tests"));
    var tagSet = Object.create(null); // keyed by agent text: no inherited names
    R.tests.forEach(function (t, i) {
      entries.push({ test: t, index: i, row: null, detail: null, open: false, haystack: haystackOf(t) });
      (t.tags || []).forEach(function (tag) { tagSet[tag] = true; });
    });

    filters.status = el("select");
    filters.status.id = "filter-status";
    [["", "all statuses"], ["not-passed", "not passed"], ["passed", "passed"], ["failed", "failed"], ["error", "error"], ["skipped", "skipped"]].forEach(function (o) {
      var option = el("option", null, o[1]);
      option.value = o[0];
      filters.status.appendChild(option);
    });
    filters.tag = el("select");
    filters.tag.id = "filter-tag";
    var any = el("option", null, "all tags");
    any.value = "";
    filters.tag.appendChild(any);
    Object.keys(tagSet).sort().forEach(function (tag) {
      var option = el("option", null, tag);
      option.value = tag;
      filters.tag.appendChild(option);
    });
    filters.score = el("input");
    filters.score.type = "number";
    filters.score.min = "0";
    filters.score.max = "100";
    filters.score.step = "1";
    filters.score.placeholder = "0";
    filters.score.id = "filter-score";
    filters.text = el("input");
    filters.text.type = "search";
    filters.text.placeholder = "id, name, message…";
    filters.text.id = "filter-text";
    filters.count = el("span", "count");
    filters.count.id = "filter-count";
    var bar = el(
      "div",
      "filters",
      el("label", null, "Status", filters.status),
      R.tests.some(function (t) { return (t.tags || []).length; }) ? el("label", null, "Tag", filters.tag) : null,
      el("label", null, "Min score", filters.score),
      el("label", null, "Search", filters.text),
      filters.count
    );
    [filters.status, filters.tag].forEach(function (f) { f.addEventListener("change", applyFilters); });
    [filters.score, filters.text].forEach(function (f) { f.addEventListener("input", applyFilters); });
    app.appendChild(bar);

    var tableNode = el("table");
    tableNode.id = "tests-table";
    var headRow = el("tr");
    COLUMNS.forEach(function (column) {
      var th = el("th", column.className, column.label);
      if (column.key) {
        attr(th, "data-sort", column.key);
        attr(th, "tabindex", 0);
        attr(th, "aria-sort", "none");
        th.addEventListener("click", function () { sortBy(column.key, th); });
        th.addEventListener("keydown", function (event) {
          if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            sortBy(column.key, th);
          }
        });
      }
      headRow.appendChild(th);
    });
    tableNode.appendChild(el("thead", null, headRow));
    var body = el("tbody");
    var fragment = document.createDocumentFragment();
    entries.forEach(function (entry) { fragment.appendChild(buildRow(entry)); });
    body.appendChild(fragment);
    tableNode.appendChild(body);
    app.appendChild(el("div", "table-wrap", tableNode));
    var empty = el("div", "empty", R.tests.length ? "No test matches the filters." : "The run has no tests.");
    empty.id = "tests-empty";
    empty.hidden = R.tests.length > 0;
    filters.empty = empty;
    app.appendChild(empty);
    filters.body = body;
    applyFilters();
  }

  var sortState = { key: null, direction: 1, header: null };

  function sortBy(key, th) {
    if (sortState.key === key) {
      sortState.direction = -sortState.direction;
    } else {
      sortState.direction = key === "score" || key === "duration" || key === "runs" ? -1 : 1;
    }
    if (sortState.header && sortState.header !== th) attr(sortState.header, "aria-sort", "none");
    sortState.key = key;
    sortState.header = th;
    attr(th, "aria-sort", sortState.direction > 0 ? "ascending" : "descending");
    var compare = SORTERS[key];
    var direction = sortState.direction;
    var ordered = entries.slice().sort(function (a, b) {
      return direction * compare(a, b) || a.index - b.index;
    });
    var fragment = document.createDocumentFragment();
    ordered.forEach(function (entry) {
      fragment.appendChild(entry.row);
      if (entry.detail) fragment.appendChild(entry.detail);
    });
    filters.body.appendChild(fragment);
  }

  function applyFilters() {
    var status = filters.status.value;
    var tag = filters.tag.value;
    var minimum = parseFloat(filters.score.value);
    var query = filters.text.value.trim().toLowerCase();
    var shown = 0;
    for (var i = 0; i < entries.length; i++) {
      var entry = entries[i];
      var t = entry.test;
      var visible =
        (!status || (status === "not-passed" ? t.status === "failed" || t.status === "error" : t.status === status)) &&
        (!tag || (t.tags || []).indexOf(tag) >= 0) &&
        (isNaN(minimum) || ((t.runs || []).length > 0 && t.score >= minimum)) &&
        (!query || entry.haystack.indexOf(query) >= 0);
      if (entry.row.hidden === visible) entry.row.hidden = !visible;
      if (entry.detail) entry.detail.hidden = !visible || !entry.open;
      if (visible) shown++;
    }
    filters.count.textContent = shown === entries.length ? plural(entries.length, "test") : shown.toLocaleString("en") + " of " + plural(entries.length, "test");
    filters.empty.hidden = shown > 0;
  }

  /* Open a test's detail from elsewhere on the page, clearing filters that hide it. */
  function openTest(index, noScroll) {
    var entry = entries[index];
    if (entry.row.hidden) {
      filters.status.value = "";
      filters.tag.value = "";
      filters.score.value = "";
      filters.text.value = "";
      applyFilters();
    }
    toggleTest(entry, true);
    if (!noScroll) entry.row.scrollIntoView({ block: "start" });
  }

  // --- a test's detail ------------------------------------------------------------------------

  /* A measurement: whole numbers as they are, large ones to 1 decimal, small ones to 3. */
  function measure(v) {
    if (!isNum(v)) return "—";
    if (Number.isInteger(v)) return v.toLocaleString("en");
    return Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(3);
  }

  /* A stability level as shown: the results' "critical" (a coefficient of variation of 0.30 or
     more) reads "very unstable", so that it is not taken for a failed critical check. */
  function stabilityWord(level) {
    return level === "critical" ? "very unstable" : level;
  }

  function statsRows(stats) {
    return [
      measure(stats.mean),
      stats.ci_95 ? measure(stats.ci_95[0]) + " – " + measure(stats.ci_95[1]) : "—",
      measure(stats.std),
      measure(stats.min) + " – " + measure(stats.max),
      stats.stability ? stabilityWord(stats.stability) : "—"
    ];
  }

  function renderTestDetail(t, testIndex) {
    var box = el("div", "test-detail-body");
    var about = [
      ["Name", t.name],
      ["Description", t.description],
      ["Tags", (t.tags || []).join(", ")],
      ["Skipped because", t.skip_reason],
      ["Passes when", passRule(t.pass_rule)],
      ["Runs", String((t.runs || []).length) + " of " + (t.planned_runs || 1) + " planned"],
      ["Adaptive plan", t.adaptive ? asText(t.adaptive) : null],
      ["Stopped", t.stop ? asText(t.stop) : null],
      ["Flaky", t.flaky === true ? "yes: its runs disagree (some passed, some failed)" : null],
      ["Quarantined", t.quarantined === true ? "yes: a failure is reported but does not fail the run" : null],
      ["Retries", retriesOf(t) ? plural(retriesOf(t), "attempt") + " made again after faults of the infrastructure" : null],
      ["Fingerprint", t.fingerprint]
    ];
    var grid = el("div", "detail-grid", el("div", null, el("h4", null, "Test"), facts(about)));
    var st = t.statistics;
    if (st && st.score) {
      var score = st.score;
      grid.appendChild(
        el(
          "div",
          "test-statistics",
          el("h4", null, "Statistics"),
          facts([
            ["Mean score", fixed(score.mean, 1)],
            ["CI 95", score.ci_95 ? fixed(score.ci_95[0], 1) + " – " + fixed(score.ci_95[1], 1) : "— (one run)"],
            ["Std", fixed(score.std, 2)],
            ["Median", fixed(score.median, 1)],
            ["Range", fixed(score.min, 1) + " – " + fixed(score.max, 1)],
            ["Stability", score.stability ? stabilityWord(score.stability) + " (CV " + fixed(score.cv, 3) + ")" : "—"],
            ["Pass rate", percent(st.pass_rate) + " (" + st.passed_runs + " of " + st.runs + ")"],
            kTable("pass@k", st.pass_at_k),
            kTable("pass^k", st.pass_hat_k)
          ])
        )
      );
    }
    var c = t.baseline;
    if (c) {
      grid.appendChild(
        el(
          "div",
          null,
          el("h4", null, "Against the baseline"),
          facts([
            ["Verdict", c.verdict + (c.verdict_holm ? " (after Holm: " + c.verdict_holm + ")" : "")],
            ["Baseline mean", fixed(c.baseline_mean, 1) + " over " + plural(c.baseline_runs || 0, "run")],
            ["Mean now", fixed(c.current_mean, 1) + " over " + plural(c.current_runs || 0, "run")],
            ["Change", isNum(c.delta) ? (c.delta >= 0 ? "+" : "") + c.delta.toFixed(1) + (isNum(c.delta_percent) ? " (" + c.delta_percent.toFixed(1) + "%)" : "") : "—"],
            ["CI 95 of the change", c.ci_95 ? fixed(c.ci_95[0], 1) + " – " + fixed(c.ci_95[1], 1) : null],
            ["p", isNum(c.p_value) ? c.p_value.toPrecision(3) + (isNum(c.p_holm) ? " (Holm: " + c.p_holm.toPrecision(3) + ")" : "") : null],
            ["Note", c.reason],
            ["Changed since the baseline", c.changed ? "yes: the test's definition differs" : null]
          ])
        )
      );
    }
    box.appendChild(grid);
    if (st) {
      var componentNames = Object.keys(st.components || {});
      if (componentNames.length) {
        var rows = componentNames.map(function (name) { return [name].concat(statsRows(st.components[name])); });
        rows.numeric = [false, true, true, true, true, false];
        box.appendChild(el("h4", null, "Score components (0–1)"));
        box.appendChild(table("compact", ["Component", "Mean", "CI 95", "Std", "Range", "Stability"], rows));
      }
      var metricNames = Object.keys(st.metrics || {});
      if (metricNames.length) {
        var metricRows = metricNames.map(function (name) { return [Object.prototype.hasOwnProperty.call(METRIC_LABELS, name) ? METRIC_LABELS[name] : name].concat(statsRows(st.metrics[name])); });
        metricRows.numeric = [false, true, true, true, true, false];
        box.appendChild(el("h4", null, "Metrics over the runs"));
        box.appendChild(table("compact", ["Metric", "Mean", "CI 95", "Std", "Range", "Stability"], metricRows));
      }
    }
    var runs = t.runs || [];
    if (runs.length) {
      box.appendChild(el("h4", null, "Runs"));
      runs.forEach(function (run, runIndex) {
        var view = (VIEWS[testIndex] || [])[runIndex] || {};
        box.appendChild(renderRun(run, view, runs.length === 1));
      });
    }
    return box;
  }

  // --- a run ----------------------------------------------------------------------------------

  function renderRun(run, view, open) {
    var outcome = run.outcome === "error" ? "error" : run.outcome === "passed" ? "passed" : "failed";
    var summary = [
      el("strong", null, "Run " + run.run_number),
      statusBadge(outcome),
      el("span", null, "score " + fixed(run.score, 1)),
      el("span", "muted", seconds(run.duration_seconds)),
      el("span", "muted", "response: " + run.status),
      run.error_code ? el("span", "badge error-code", String(run.error_code)) : null,
      Array.isArray(run.retries) && run.retries.length ? el("span", "badge flag-retries", run.retries.length === 1 ? "1 retry" : run.retries.length + " retries") : null
    ];
    var details = lazyDetails("run", summary, function (d) { d.appendChild(renderRunBody(run, view)); }, open);
    attr(details, "data-run", run.run_number);
    return details;
  }

  function renderRunBody(run, view) {
    var body = el("div", "run-body");
    body.appendChild(
      facts([
        ["Started", when(run.started_at)],
        ["Task id", run.task_id],
        ["Response status", run.status],
        ["Error code", run.error_code],
        ["Agent's trace", run.trace_id]
      ])
    );
    if (run.error) body.appendChild(el("div", "notice bad run-error", String(run.error)));
    if (run.error_details && typeof run.error_details === "object") {
      body.appendChild(lazyDetails(null, "error details", function (d) { d.appendChild(clipped(JSON.stringify(run.error_details, null, 2), 20000)); }));
    }
    var retried = renderRetries(run.retries);
    if (retried) body.appendChild(retried);
    (run.warnings || []).forEach(function (w) { body.appendChild(el("div", "notice warn", String(w))); });
    if (run.traceback) {
      body.appendChild(lazyDetails(null, "adapter traceback", function (d) { d.appendChild(clipped(String(run.traceback), 20000)); }));
    }
    var breakdown = Object.keys(run.score_breakdown || {});
    if (breakdown.length) {
      var rows = breakdown.map(function (name) { return [name, fixed(run.score_breakdown[name], 3)]; });
      rows.numeric = [false, true];
      body.appendChild(el("h4", null, "Score breakdown"));
      body.appendChild(table("compact", ["Component", "Value (0–1)"], rows));
    }
    body.appendChild(renderChecks(run.checks || []));
    var events = Array.isArray(run.events) ? run.events : [];
    var left = view.events_left_out || 0;
    var traceTitle = "Trace: " + plural(events.length, "event") + (left ? " (" + left.toLocaleString("en") + " more left out of the report)" : "");
    body.appendChild(lazyDetails("trace", traceTitle, function (d) { d.appendChild(renderTrace(events, left)); }));
    body.appendChild(renderArtifacts(view.artifacts || []));
    body.appendChild(renderMetrics(run));
    var log = typeof view.log === "string" ? view.log : "";
    var logTitle = "Agent log" + (log ? (view.log_note ? " (" + view.log_note + ")" : "") : ": empty");
    body.appendChild(
      lazyDetails("log", logTitle, function (d) {
        d.appendChild(log ? clipped(log, 200000, "log-text") : el("p", "muted", "The agent wrote nothing to its log."));
      }, run.outcome !== "passed" && log.length > 0)
    );
    return body;
  }

  /* The attempts made before the one whose result this is, each ended by a fault of the
     infrastructure: which, where, why, and the wait before the next. */
  function renderRetries(retries) {
    if (!Array.isArray(retries) || !retries.length) return null;
    var rows = retries.map(function (r) {
      return [asText(r.attempt), r.where ? String(r.where) : "—", asText(r.reason), isNum(r.waited_seconds) ? r.waited_seconds.toFixed(2) + " s" : "—"];
    });
    rows.numeric = [true, false, false, true];
    return el(
      "div",
      "retries",
      el("h4", null, "Retries"),
      el("p", "muted", "Attempts made again after a fault of the infrastructure; this result is of the attempt after them."),
      table("compact retries-table", ["Attempt", "Where", "Reason", "Waited"], rows)
    );
  }

  function renderChecks(checks) {
    var box = el("div", "checks");
    box.appendChild(el("h4", null, "Checks"));
    if (!checks.length) {
      box.appendChild(el("p", "muted", "No checks."));
      return box;
    }
    var t = el("table", "checks-table");
    t.appendChild(el("thead", null, el("tr", null, el("th", null, ""), el("th", null, "Check"), el("th", "num", "Score"), el("th", null, "Message"))));
    var tbody = el("tbody");
    checks.forEach(function (check) {
      var message = el("td", "message", String(check.message));
      if (check.details !== undefined && check.details !== null) {
        message.appendChild(lazyDetails("check-details", "details", function (d) { d.appendChild(clipped(asText(check.details), 20000)); }));
      }
      /* a check that was not made (skipped, with its reason) is neither passed nor failed */
      var state = check.skipped ? "skipped" : check.passed ? "passed" : "failed";
      var mark = el("span", "check-" + state, { passed: "✓", failed: "✗", skipped: "–" }[state]);
      attr(mark, "title", check.skipped ? "skipped: " + String(check.skipped) : state);
      var score = check.skipped ? el("td", "num muted", "—") : el("td", "num", fixed(check.score, 2));
      tbody.appendChild(el("tr", "check " + state, el("td", null, mark), el("td", "mono", String(check.name)), score, message));
    });
    t.appendChild(tbody);
    box.appendChild(el("div", "table-wrap", t));
    return box;
  }

  function renderMetrics(run) {
    var box = el("div", "metrics");
    box.appendChild(el("h4", null, "Metrics"));
    var m = run.metrics || {};
    var pairs = Object.keys(METRIC_LABELS)
      .filter(function (k) { return m[k] !== undefined && m[k] !== null; })
      .map(function (k) { return [METRIC_LABELS[k], asText(m[k])]; });
    var tr = run.trace || {};
    var tools = Object.keys(tr.tool_calls || {}).map(function (k) { return k + " × " + tr.tool_calls[k]; });
    var others = Object.keys(tr.by_type || {}).map(function (k) { return k + " × " + tr.by_type[k]; });
    pairs.push(
      ["events", String(tr.events || 0)],
      ["tools called", tools.join(", ")],
      ["LLM calls (events)", tr.llm_calls ? String(tr.llm_calls) : null],
      ["tokens (events)", tr.input_tokens || tr.output_tokens ? "in " + (tr.input_tokens || 0) + " · out " + (tr.output_tokens || 0) : null],
      ["error events", tr.errors ? tr.errors + " (" + (tr.unrecoverable_errors || 0) + " unrecoverable)" : null],
      ["events out of order", tr.out_of_order ? String(tr.out_of_order) : null],
      ["other event types", others.join(", ")]
    );
    box.appendChild(pairs.length ? facts(pairs) : el("p", "muted", "The agent reported no metrics."));
    return box;
  }

  // --- artifacts ------------------------------------------------------------------------------

  function renderArtifacts(artifacts) {
    var box = el("div", "artifacts");
    box.appendChild(el("h4", null, "Artifacts"));
    if (!artifacts.length) {
      box.appendChild(el("p", "muted", "No artifacts."));
      return box;
    }
    artifacts.forEach(function (a) { box.appendChild(renderArtifact(a)); });
    return box;
  }

  function renderArtifact(a) {
    var head = el(
      "div",
      "artifact-head",
      el("span", "title", String(a.title)),
      el("span", "badge status-skipped", String(a.kind)),
      a.content_type ? el("span", "muted", String(a.content_type)) : null,
      isNum(a.size_bytes) ? el("span", "muted", sizeText(a.size_bytes)) : null,
      a.schema ? el("span", "muted", "schema " + a.schema) : null,
      a.content_hash ? el("span", "muted mono", String(a.content_hash).slice(0, 24)) : null
    );
    var body = el("div", "artifact-body");
    if (typeof a.text !== "string") {
      body.appendChild(el("p", "muted", a.kind === "reference" ? "A file the agent named; its content is not in the report." : "No inline content."));
    } else {
      if (isNum(a.full_size)) body.appendChild(el("p", "clip-note", "Showing the first 64 KiB of " + sizeText(a.full_size) + "."));
      if (a.format === "markdown") {
        var rendered = renderMarkdown(a.text);
        var source = el("pre", "markdown-source", a.text);
        source.hidden = true;
        var toggle = button("show source", function () {
          source.hidden = !source.hidden;
          rendered.hidden = !source.hidden;
          toggle.textContent = source.hidden ? "show source" : "show rendered";
        });
        body.appendChild(el("div", "more", toggle));
        body.appendChild(rendered);
        body.appendChild(source);
      } else {
        body.appendChild(el("pre", a.format === "json" ? "json" : null, a.text));
      }
    }
    return el("div", "artifact", head, body);
  }

  // --- the trace ------------------------------------------------------------------------------

  function typeOf(event) {
    return event && typeof event.event_type === "string" ? event.event_type : "?";
  }

  function classOf(type) {
    return Object.prototype.hasOwnProperty.call(EVENT_LABELS, type) ? "ev-" + type : "ev-other";
  }

  function renderTrace(events, leftOut) {
    var box = el("div", "trace-view");
    var n = events.length;
    if (leftOut) box.appendChild(el("div", "notice warn", leftOut.toLocaleString("en") + " more events are in the run directory but not in the report (it keeps the first 32 MiB of a run's events)."));
    if (!n) {
      box.appendChild(el("p", "muted", "The run has no events."));
      return box;
    }
    // Times: offsets from the earliest event (an agent's clock, not ATP's).
    var times = new Float64Array(n);
    var first = Infinity;
    var last = -Infinity;
    var counts = Object.create(null); // keyed by agent text: no inherited names
    var order = [];
    for (var i = 0; i < n; i++) {
      var ms = parseTime(events[i] && events[i].timestamp);
      times[i] = ms;
      if (ms < first) first = ms;
      if (ms > last) last = ms;
      var type = typeOf(events[i]);
      if (!counts[type]) {
        counts[type] = 0;
        order.push(type);
      }
      counts[type]++;
    }
    var timed = isFinite(first) && last > first;

    var enabled = Object.create(null); // keyed by agent text: no inherited names
    var tools = el("div", "trace-tools");
    order.forEach(function (type) {
      enabled[type] = true;
      var box2 = el("input");
      box2.type = "checkbox";
      box2.checked = true;
      attr(box2, "data-type", type);
      box2.addEventListener("change", function () {
        enabled[type] = box2.checked;
        refilter();
      });
      tools.appendChild(el("label", "type-chip", box2, el("span", "swatch " + classOf(type)), (Object.prototype.hasOwnProperty.call(EVENT_LABELS, type) ? EVENT_LABELS[type] : type) + " (" + counts[type].toLocaleString("en") + ")"));
    });
    var search = el("input", "trace-search");
    search.type = "search";
    search.placeholder = "search the events";
    var searchTimer = null;
    search.addEventListener("input", function () {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(refilter, 150);
    });
    tools.appendChild(search);
    box.appendChild(tools);

    var canvas = el("canvas", "timeline");
    attr(canvas, "aria-label", "the events on a timeline, one lane per type");
    attr(canvas, "role", "img");
    box.appendChild(canvas);
    var span = timed ? (last - first) / 1000 : 0;
    box.appendChild(
      el(
        "div",
        "timeline-axis",
        el("span", null, timed ? "+0s" : "first event"),
        el("span", null, timed ? plural(n, "event") + " over " + seconds(span) : "events placed in order (their timestamps do not differ)"),
        el("span", null, timed ? "+" + seconds(span) : "last event")
      )
    );

    var list = el("div", "events");
    var more = el("div", "more");
    box.appendChild(list);
    box.appendChild(more);

    var haystacks = null; // lower-case JSON text of each event, made on the first search
    var selected = [];
    var shown = 0;
    var showingAll = false;

    function refilter() {
      var query = search.value.trim().toLowerCase();
      if (query && !haystacks) {
        haystacks = new Array(n);
        for (var k = 0; k < n; k++) haystacks[k] = asText(events[k]).toLowerCase();
      }
      selected = [];
      for (var j = 0; j < n; j++) {
        if (enabled[typeOf(events[j])] && (!query || haystacks[j].indexOf(query) >= 0)) selected.push(j);
      }
      list.textContent = "";
      shown = 0;
      showingAll = false;
      showMore(CHUNK);
    }

    function showMore(count) {
      var end = Math.min(selected.length, shown + count);
      var fragment = document.createDocumentFragment();
      for (var k = shown; k < end; k++) {
        var index = selected[k];
        fragment.appendChild(renderEvent(events[index], times[index], first, index));
      }
      list.appendChild(fragment);
      shown = end;
      updateMore();
    }

    function showAll() {
      showingAll = true;
      updateMore();
      (function step() {
        if (!showingAll || shown >= selected.length) return;
        showMore(SHOW_ALL_STEP);
        setTimeout(step, 0);
      })();
    }

    function updateMore() {
      more.textContent = "";
      var rest = selected.length - shown;
      more.appendChild(el("span", "muted", "showing " + shown.toLocaleString("en") + " of " + plural(selected.length, "event")));
      if (rest > 0 && !showingAll) {
        more.appendChild(button("show " + Math.min(CHUNK, rest).toLocaleString("en") + " more", function () { showMore(CHUNK); }, "show-more"));
        more.appendChild(button("show all", showAll, "show-all"));
      }
    }

    refilter();
    // The canvas is drawn once it is in the page (it needs its width).
    setTimeout(function () { drawTimeline(canvas, events, times, first, last, timed, order); }, 0);
    return box;
  }

  function drawTimeline(canvas, events, times, first, last, timed, order) {
    var ratio = window.devicePixelRatio || 1;
    var width = Math.max(canvas.clientWidth, 100) * ratio;
    var height = Math.max(canvas.clientHeight, 20) * ratio;
    canvas.width = width;
    canvas.height = height;
    var ctx = canvas.getContext("2d");
    if (!ctx) return;
    var lanes = order.length;
    var lane = Object.create(null); // keyed by agent text: no inherited names
    order.forEach(function (type, i) { lane[type] = i; });
    var laneHeight = height / lanes;
    var n = events.length;
    var mark = Math.max(2, 2 * ratio); // a tick's width: visible however few events there are
    for (var i = 0; i < n; i++) {
      var type = typeOf(events[i]);
      var position = timed && isFinite(times[i]) ? (times[i] - first) / (last - first) : n > 1 ? i / (n - 1) : 0.5;
      ctx.fillStyle = EVENT_COLOURS[Object.prototype.hasOwnProperty.call(EVENT_LABELS, type) ? type : "other"];
      ctx.fillRect(Math.min(position * (width - mark), width - mark), lane[type] * laneHeight + 1, mark, Math.max(laneHeight - 2, 1));
    }
  }

  function field(label, value, className) {
    if (value === undefined || value === null || value === "") return null;
    return el("span", "field" + (className ? " " + className : ""), el("span", "label", label), asText(value));
  }

  /* A tool's input or output: short JSON on one line, longer JSON indented. */
  function compactText(value) {
    if (typeof value === "string") return value;
    var line;
    try {
      line = JSON.stringify(value);
    } catch (e) {
      return String(value);
    }
    return typeof line === "string" && line.length <= 100 ? line : asText(value);
  }

  function io(label, value) {
    if (value === undefined || value === null) return null;
    return el("div", "io " + label, el("span", "label", label), clipped(compactText(value), CLIP));
  }

  function renderEvent(event, ms, first, index) {
    var type = typeOf(event);
    var known = Object.prototype.hasOwnProperty.call(EVENT_LABELS, type);
    var p = event && typeof event.payload === "object" && event.payload !== null && !Array.isArray(event.payload) ? event.payload : {};
    var row = el("div", "event " + classOf(type));
    attr(row, "data-index", index);
    var offset = el("span", "offset", isFinite(ms) && isFinite(first) ? "+" + ((ms - first) / 1000).toFixed(3) + "s" : "");
    attr(offset, "title", asText(event && event.timestamp));
    row.appendChild(offset);
    row.appendChild(el("span", "seq", isNum(event && event.sequence) ? "#" + event.sequence : ""));
    row.appendChild(attr(el("span", "type-label " + classOf(type), known ? EVENT_LABELS[type] : type), "title", type));
    var body = el("div", "body");
    if (event && event.recorded_by) body.appendChild(el("span", "tag", "recorded by ATP (" + asText(event.recorded_by) + ")"));
    if (type === "tool_call") {
      body.appendChild(el("div", null, el("strong", "mono tool-name", asText(p.tool)), " ", field("status", p.status), field("duration", isNum(p.duration_ms) ? p.duration_ms + " ms" : null), field("error", p.error, "bad")));
      body.appendChild(el("div", "io-pair", io("input", p.input), io("output", p.output)));
    } else if (type === "llm_request") {
      var tokens = isNum(p.input_tokens) || isNum(p.output_tokens) ? "in " + (isNum(p.input_tokens) ? p.input_tokens : "?") + " · out " + (isNum(p.output_tokens) ? p.output_tokens : "?") : null;
      body.appendChild(el("div", null, field("model", p.model, "mono"), field("tokens", tokens), field("duration", isNum(p.duration_ms) ? p.duration_ms + " ms" : null), field("temperature", p.temperature), field("stop", p.stop_reason)));
    } else if (type === "reasoning") {
      if (p.step !== undefined && p.step !== null) body.appendChild(el("div", null, field("step", p.step)));
      if (p.thought !== undefined && p.thought !== null) body.appendChild(clipped(asText(p.thought), CLIP, "thought"));
      if (Array.isArray(p.plan)) {
        var plan = el("ol");
        p.plan.forEach(function (s) { plan.appendChild(el("li", null, asText(s))); });
        body.appendChild(plan);
      }
    } else if (type === "state_change") {
      body.appendChild(el("div", null, el("span", "mono", asText(p.from_state) || "?"), " → ", el("span", "mono", asText(p.to_state) || "?"), " ", field("reason", p.reason)));
    } else if (type === "artifact_created") {
      body.appendChild(el("div", null, field("type", p.artifact_type), field("name", p.name, "mono"), field("path", p.path, "mono"), field("size", isNum(p.size_bytes) ? sizeText(p.size_bytes) : null)));
    } else if (type === "error") {
      body.appendChild(el("div", null, el("strong", "bad", asText(p.error_type) || "error"), p.message !== undefined && p.message !== null ? ": " + asText(p.message) : ""));
      body.appendChild(el("div", null, field("recoverable", p.recoverable === true ? "yes" : p.recoverable === false ? "no" : null), field("retry after", isNum(p.retry_after_ms) ? p.retry_after_ms + " ms" : null)));
    } else if (type === "progress") {
      var line = el("div");
      if (isNum(p.percentage)) {
        var fill = el("span");
        fill.style.width = Math.max(0, Math.min(100, p.percentage)) + "%";
        line.appendChild(el("span", "progress-bar", fill));
        line.appendChild(el("span", "field", fixed(p.percentage, 0) + "%"));
      }
      if (isNum(p.current_step)) line.appendChild(field("step", p.current_step + (isNum(p.total_steps) ? " / " + p.total_steps : "")));
      if (p.message !== undefined && p.message !== null) line.appendChild(el("span", null, asText(p.message)));
      body.appendChild(line);
    } else {
      body.appendChild(clipped(asText(event && event.payload), CLIP));
    }
    row.appendChild(body);
    return row;
  }

  // --- start ----------------------------------------------------------------------------------

  var started = performance.now();
  try {
    renderHeader();
    renderTests();
    if (R.tests.length === 1) openTest(0, true);
    window.__atpReport = { ready: true, tests: R.tests.length, renderMs: performance.now() - started };
  } catch (error) {
    app.appendChild(el("div", "notice bad", "The report could not be drawn: " + String(error && error.message)));
    window.__atpReport = { ready: false, error: String(error && error.message) };
  }
})();
