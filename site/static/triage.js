// The triage page: a pasted log matched against every runbook signature, in the browser, offline.
// The data (static/triage/signatures.js, written by `runbook site build`) holds the signatures as
// JavaScript regexes with their weights, the regexes `runbook triage` normalises lines with, and
// the ranking (engine/runbook/triage/ranking.py): its sort keys, formulas, role table and line
// counts are applied below as triage/formula.py, ordering.py and verdict.py apply them, with no
// ranking rule of the page's own. Nothing is fetched.
(function () {
  "use strict";

  var CONTINUATION = ".,;:()[]{}'\"/_-";

  function regex(spec, extraFlags) {
    return new RegExp(spec.source, spec.flags + (extraFlags || ""));
  }

  function anchored(spec) { // Python's re.match: only at the start
    return new RegExp("^(?:" + spec.source + ")", spec.flags);
  }

  // Python's round(x, digits): the nearest value, and on an exact tie (a binary value such as
  // 0.125) the even neighbour, where toFixed takes the larger one
  function pyRound(x, digits) {
    var fixed = x.toFixed(digits), exact = x.toFixed(Math.min(100, digits + 40));
    var cut = exact.indexOf(".") + 1 + digits;
    if (digits < 1 || !/^50*$/.test(exact.slice(cut))) return Number(fixed);
    var lower = exact.slice(0, cut);
    return Number(lower.charAt(lower.length - 1)) % 2 === 0 ? Number(lower) : Number(fixed);
  }

  function codePoints(text) { // len() in Python counts code points, .length UTF-16 units
    return /[\uD800-\uDBFF]/.test(text) ? Array.from(text).length : text.length;
  }

  // -- the ranking: data.ranking interpreted --

  var FOLDS = { // triage/formula.py: operators folded left to right over their operands
    "+": function (a, b) { return a + b; },
    "-": function (a, b) { return a - b; },
    "*": function (a, b) { return a * b; },
    "/": function (a, b) { return a / b; },
    "min": function (a, b) { return Math.min(a, b); },
    "max": function (a, b) { return Math.max(a, b); }
  };
  var UNARY = { "log2": Math.log2, "sqrt": Math.sqrt };
  var has = function (object, key) { return Object.prototype.hasOwnProperty.call(object, key); };

  // formula.evaluate: a number or boolean is itself, a string a name, a list [operator, operands...]
  function evaluate(formula, names) {
    var type = typeof formula;
    if (type === "number" || type === "boolean") return formula;
    if (type === "string") {
      if (!has(names, formula)) throw new Error("ranking formula: unknown name " + formula);
      return names[formula];
    }
    var op = formula[0], operands = formula.slice(1);
    if (op === "if" && operands.length === 3) {
      return evaluate(evaluate(operands[0], names) ? operands[1] : operands[2], names);
    }
    if (has(UNARY, op) && operands.length === 1) return UNARY[op](evaluate(operands[0], names));
    if (has(FOLDS, op) && operands.length >= 2) {
      var value = evaluate(operands[0], names);
      for (var i = 1; i < operands.length; i++) value = FOLDS[op](value, evaluate(operands[i], names));
      return value;
    }
    throw new Error("ranking formula: " + JSON.stringify(op) + " with " + operands.length + " operands");
  }

  // what each sort key of ranking.order reads of a match (triage/ordering.py FIELDS); the page's
  // matches are of one log, so a position is a line number
  var FIELDS = {
    "role": function (m, ranking) { return ranking.roleRank(m.role); },
    "generic": function (m) { return m.generic; },
    "catch_all": function (m) { return !!(m.info && m.info.catch_all); },
    "position": function (m) { return m.first ? m.first.no : Infinity; }, // a reading has no line: last
    "score": function (m) { return m.score; }
  };

  function Ranking(rules) {
    this.rules = rules;
    this.roleIds = rules.roles.map(function (entry) { return entry.id; });
  }

  // ordering.role_rank: the role's place in the table, a role not in it after all that are
  Ranking.prototype.roleRank = function (role) {
    var at = this.roleIds.indexOf(role);
    return at < 0 ? this.roleIds.length : at;
  };

  // min(roles, key=role_rank): the role a match (or the verdict) takes, null for none
  Ranking.prototype.topRole = function (roles) {
    var top = null;
    roles.forEach(function (role) {
      if (top === null || this.roleRank(role) < this.roleRank(top)) top = role;
    }, this);
    return top;
  };

  Ranking.prototype.formula = function (evidence, name, names) {
    return evaluate(this.rules.evidence[evidence][name], names);
  };

  // verdict.confidence: the evidence's confidence times the role's share, rounded
  Ranking.prototype.confidence = function (evidence, names, role) {
    var share = this.rules.roles[this.roleIds.indexOf(role)].confidence;
    var sure = this.formula(evidence, "confidence", names) * share;
    return pyRound(sure, this.rules.confidence_digits);
  };

  // ordering.order: the sort keys, first deciding (a stable sort), then by_time
  Ranking.prototype.order = function (matches) {
    var keys = this.rules.order, self = this;
    var sorted = matches.slice().sort(function (a, b) {
      for (var i = 0; i < keys.length; i++) {
        var field = FIELDS[keys[i].key], x = field(a, self), y = field(b, self);
        var sign = x < y ? -1 : x > y ? 1 : 0;
        if (sign) return keys[i].descending ? -sign : sign;
      }
      return 0;
    });
    return this.rules.by_time ? this.byTime(sorted, this.rules.by_time.within) : sorted;
  };

  // ordering.by_time: within a run of matches equal on the `within` fields, by the clock when
  // every match has a time (the date too when all have one, else the time of day); a stable sort
  Ranking.prototype.byTime = function (matches, within) {
    var self = this;
    function sameTier(a, b) {
      return within.every(function (name) { return FIELDS[name](a, self) === FIELDS[name](b, self); });
    }
    var out = [];
    var i = 0;
    while (i < matches.length) {
      var j = i;
      while (j < matches.length && sameTier(matches[j], matches[i])) j++;
      var run = matches.slice(i, j);
      if (run.length > 1 && run.every(function (m) { return m.time; })) {
        var dated = run.every(function (m) { return m.time.indexOf(" ") >= 0; });
        var clock = function (m) { return dated ? m.time : timeOfDay(m.time); };
        run.sort(function (a, b) { return clock(a) < clock(b) ? -1 : clock(a) > clock(b) ? 1 : 0; });
      }
      out = out.concat(run);
      i = j;
    }
    return out;
  };

  function timeOfDay(value) { // sources.time_of_day
    return value.slice(value.lastIndexOf(" ") + 1);
  }

  // Match.lines: the matched lines in log order; the first `shown_first` and the last ones
  Ranking.prototype.shownLines = function (hits) {
    var byNo = {};
    hits.forEach(function (h) { h.first.concat(h.last).forEach(function (l) { byNo[l.no] = l; }); });
    var ordered = Object.keys(byNo).map(Number).sort(function (a, b) { return a - b; })
      .map(function (no) { return byNo[no]; });
    var limit = this.rules.lines.shown, head = Math.min(this.rules.lines.shown_first, limit);
    return ordered.length <= limit ? ordered
      : ordered.slice(0, head).concat(ordered.slice(ordered.length - (limit - head)));
  };

  // -- the engine --

  function Engine(data) {
    var norm = data.normalise;
    this.data = data;
    this.ranking = new Ranking(data.ranking);
    this.ansi = regex(norm.ansi, "g");
    this.prefix = regex(norm.prefix);
    this.criPartial = anchored(norm.cri_partial);
    this.entity = regex(norm.entity, "g");
    this.entities = norm.entities;
    this.wrapWidths = {};
    for (var i = 0; i < norm.wrap_widths.length; i++) this.wrapWidths[norm.wrap_widths[i]] = true;
    this.maxJoined = norm.max_joined;
    this.recordStart = norm.record_start;
    this.lineTime = regex(data.time);
    this.errors = {
      keywords: data.errors.keywords, exception: anchored(data.errors.exception),
      error: regex(data.errors.error), notError: regex(data.errors.not_error),
      traceback: regex(data.errors.traceback)
    };
    this.frameRe = regex(data.errors.frame);
    this.logEndsRe = { finished: regex(data.logends.finished), rl: regex(data.logends.rl),
                       word: regex(data.logends.word), pointed: regex(data.logends.pointed),
                       values: regex(data.logends.values), ncclTests: regex(data.logends.nccl_tests),
                       ncclTestsRow: regex(data.logends.nccl_tests_row),
                       ncclTestsHost: regex(data.logends.nccl_tests_host, "g") };
    this.lineRank = regex(data.line_rank);
    this.identity = regex(data.spread.identity);
    this.facts = data.spread.facts.map(function (spec) { return { spec: spec, re: regex(spec.regex) }; });
    this.metrics = data.series.metrics.map(function (spec) { return { spec: spec, re: regex(spec.regex) }; });
    this.schedule = regex(data.series.schedule);
    this.stackRe = {};
    Object.keys(data.stacks.patterns).forEach(function (name) {
      this.stackRe[name] = regex(data.stacks.patterns[name]);
    }, this);
    this.nativeRules = data.stacks.frames.native.map(function (rule) { return { rule: rule, re: new RegExp(rule.pattern) }; });
    this.soFile = new RegExp(data.stacks.frames.so_file);
    this.frameAddress = regex(data.stacks.address);  // stacks.ADDRESS: a frame with no name
    var tokenizer = new Tokenizer((data.similarity || data.cases).cjk);
    this.cases = data.cases && data.cases.items.length ? new KnownCases(data.cases, tokenizer) : null;
    this.similarity = data.similarity && data.similarity.docs.length
      ? new SimilarityIndex(data.similarity, tokenizer, this.ranking) : null;
    this.signatures = [];
    this.broken = [];
    for (var j = 0; j < data.signatures.length; j++) {
      var sig = data.signatures[j];
      try {
        this.signatures.push({ sig: sig, re: regex(sig) });
      } catch (err) {
        this.broken.push(sig.pattern);
      }
    }
  }

  Engine.prototype.stripAnsi = function (line) {
    return line.indexOf("\x1b") >= 0 ? line.replace(this.ansi, "") : line;
  };

  // lognorm.normalize: no colours, HTML escapes, leading timestamps or rank prefixes
  Engine.prototype.normalise = function (line) {
    line = this.stripAnsi(line);
    if (line.indexOf("&") >= 0) {
      var entities = this.entities;
      line = line.replace(this.entity, function (e) { return entities[e]; }); // lognorm.unescape
    }
    return line.replace(this.prefix, "");
  };

  // lognorm.join_wrapped: [{first, last, text}] with lines a terminal or runtime cut joined again
  Engine.prototype.joinWrapped = function (lines) {
    var out = [];
    var pending = null, partial = false, openParen = false, first = 0, number = 0;
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i];
      number = i + 1;
      if (pending !== null) {
        var own = Array.from(pending).slice(0, this.recordStart).join("");
        var goesOn = this.continues(line) && line.indexOf(own) !== 0 && (!openParen || closes(line));
        if ((partial || goesOn) && codePoints(pending) < this.maxJoined) {
          pending += partial ? line.replace(this.prefix, "") : line;
          partial = this.isPartial(line);
          openParen = false;
          if (!(partial || this.isCut(line))) {
            out.push({ first: first, last: number, text: pending });
            pending = null;
          }
          continue;
        }
        out.push({ first: first, last: number - 1, text: pending });
        pending = null;
      }
      openParen = stopsInParenthesis(line);
      if (!this.wrapWidths[codePoints(line)] && line.slice(0, 48).indexOf(" P ") < 0 && !openParen) {
        out.push({ first: number, last: number, text: line });
        continue;
      }
      partial = this.isPartial(line);
      if (partial || openParen || this.isCut(line)) {
        pending = line;
        first = number;
      } else {
        out.push({ first: number, last: number, text: line });
      }
    }
    if (pending !== null) out.push({ first: first, last: number, text: pending });
    return out;
  };

  // lognorm._stops_in_parenthesis: a line cut mid-word inside a parenthesis (`WorkNCCL(S`)
  function stopsInParenthesis(line) {
    var chars = Array.from(line);
    return chars.length > 0 && /[\p{L}\p{N}]/u.test(chars[chars.length - 1]) &&
      line.lastIndexOf("(") > line.lastIndexOf(")");
  }

  // lognorm._closes: the line closes more parentheses than it opens
  function closes(line) {
    return line.split(")").length > line.split("(").length;
  }

  Engine.prototype.isPartial = function (line) {
    return line.slice(0, 48).indexOf(" P ") >= 0 && this.criPartial.test(line);
  };

  Engine.prototype.isCut = function (line) {
    return this.wrapWidths[codePoints(line)] === true && !/\s/.test(line.charAt(line.length - 1));
  };

  Engine.prototype.continues = function (line) {
    var rest = line.charAt(0) === " " ? line.slice(1) : line;
    if (!rest || /\s/.test(rest.charAt(0))) return false;
    var c = Array.from(rest)[0];
    var reads = /\p{Ll}/u.test(c) || /\p{Nd}/u.test(c) || CONTINUATION.indexOf(c) >= 0;
    return reads && !this.prefix.test(line);
  };

  // scan._line_hit: a line's own time, else the nearest one in the time_lookback lines above it
  // (Python looks within its block of 4096 lines; a paste that long may differ at a block's edge)
  Engine.prototype.timeNear = function (line, lines) {
    var time = this.timeOf(line.raw);
    for (var i = line.idx - 1; time === null && i >= 0 && i >= line.idx - this.data.time_lookback; i--) {
      time = this.timeOf(lines[i].raw);
    }
    return time;
  };

  // sources.line_time: "YYYY-MM-DD HH:MM:SS[.ffffff]" (date when the line has one), or null
  Engine.prototype.timeOf = function (raw) {
    var found = this.lineTime.exec(Array.from(raw.slice(0, 160)).slice(0, 80).join(""));
    if (!found) return null;
    var g = found.groups || {};
    var date = (g.date || "").replace(/\//g, "-");
    var frac = g.frac ? "." + g.frac : "";
    return (date + " " + g.time + frac).trim();
  };

  // errorlines.ErrorLines.see: "exception", "error", "traceback" (its first line or a frame), or null
  Engine.prototype.errorKind = function (text) {
    // scan.py tests the keywords on the line with its digits masked (`", line 0` finds a frame)
    var lowered = text.toLowerCase().replace(/[0-9]/g, "0");
    if (!this.errors.keywords.some(function (k) { return lowered.indexOf(k) >= 0; })) return null;
    if (this.errors.notError.test(text)) return null;
    if (this.errors.exception.test(text)) return "exception";
    if (this.errors.error.test(text)) return "error";
    return this.errors.traceback.test(text) ? "traceback" : null;
  };

  // What one log shows: {lines, matches (ranked), verdict, errorLine}
  Engine.prototype.triage = function (text) {
    var raw = text.split(/\r\n|\r|\n/);
    if (raw.length && raw[raw.length - 1] === "" && /[\r\n]$/.test(text)) raw.pop();
    if (raw.length === 1 && raw[0] === "") raw = [];
    var joined = this.joinWrapped(raw);
    var lines = joined.map(function (piece, idx) {
      return { no: piece.first, raw: piece.text, text: this.normalise(piece.text), idx: idx };
    }, this);
    var hits = this.scan(lines);
    var matches = this.rank(hits, lines);
    var readings = this.stackReadings(lines).concat(this.readings(lines), this.topologyReadings(lines));
    var differences = this.differences(lines);
    if (!matches.length && !readings.length && !differences.length && !this.anyErrorLike(lines)) {
      readings = this.logEnds(lines); // result.rank_all: a paste that just stops
    }
    if (!matches.some(function (m) { return !m.generic; })) { // result.rank_all
      var read = this.fromReadings(readings.concat(this.differenceReadings(differences))), named = {};
      read.forEach(function (m) { named[m.key] = true; });
      matches = this.ranking.order(read.concat(matches.filter(function (m) { return !named[m.key]; })));
    }
    var query = this.errorQuery(lines), errorLine = query.line;
    if (errorLine && this.similarity && !matches.some(function (m) { return !m.generic; })) {
      var said = {}; // a resemblance to a conclusion already named says nothing new
      matches.forEach(function (m) { said[m.key] = true; });
      matches = matches.concat(this.similarity.similar(errorLine, query.text, this.data.conclusions)
        .filter(function (m) { return !said[m.key]; }));
    }
    var top = this.ranking.topRole(matches.map(function (m) { return m.role; })); // result._verdict
    var verdict = top !== null && top !== "similar" ? top : errorLine ? "unknown" : "no-error";
    var shape = verdict === "unknown" || verdict === "no-error" ? this.shapeOf(lines, verdict) : null;
    if (verdict === "no-error") matches = this.healthyMatches(readings); // the numbers read as well
    matches = this.withCases(matches, verdict, lines);
    return { lines: raw.length, matches: matches, verdict: verdict, errorLine: errorLine, shape: shape,
             differences: differences, readings: readings,
             closest: matches.length ? [] : this.closest(lines, verdict) };
  };

  // advice.advise's `closest`: with no error line, the conclusions the excerpt's last lines resemble
  Engine.prototype.closest = function (lines, verdict) {
    if (verdict !== "no-error" || !this.similarity) return [];
    var rules = this.data.advice.closest;
    var texts = lines.slice(-this.data.advice.tail_lines).map(function (l) { return l.text; })
      .filter(function (t) { return t.trim(); });
    if (!texts.length) return [];
    return this.similarity.resembling(texts.slice(-rules.query_lines).join("\n"), rules.top, rules.why_words,
                                      this.data.conclusions);
  };

  // spread.Spread: who writes a line (NCCL's host prefix, else the rank a launcher's prefix names)
  Engine.prototype.who = function (raw) {
    var host = this.identity.exec(raw.slice(0, 240));
    if (host) return host[1];
    var rank = this.lineRank.exec(raw.slice(0, 200));
    if (!rank) return null;
    for (var g = 1; g < rank.length; g++) if (rank[g] !== undefined) return "rank " + parseInt(rank[g], 10);
    return null;
  };

  // series.rank_or_host: numbers are compared per rank, else per host
  Engine.prototype.rankOrHost = function (raw) {
    var rank = this.lineRank.exec(raw.slice(0, 200));
    if (rank) for (var g = 1; g < rank.length; g++) if (rank[g] !== undefined) return "rank " + parseInt(rank[g], 10);
    return this.who(raw) || "";
  };

  // spread.Spread.differences: the versions and NCCL settings stated with more than one value
  Engine.prototype.differences = function (lines) {
    var rules = this.data.spread, facts = [], byFact = {};
    for (var i = 0; i < lines.length; i++) {
      var text = lines[i].text, lowered = text.toLowerCase();
      for (var f = 0; f < this.facts.length; f++) {
        var spec = this.facts[f].spec;
        if (lowered.indexOf(spec.needle) < 0) continue;
        var found = this.facts[f].re.exec(text);
        if (!found) continue;
        var who = this.who(lines[i].raw);
        if (who === null) break;
        var groups = found.slice(1);
        var name = groups.length === 2 ? groups[0] : spec.fact;
        var value = groups.length === 2 ? groups[1] : groups.length === 1 ? groups[0] : spec.value;
        if (!byFact[name]) { byFact[name] = { fact: name, conclusion: spec.conclusion, values: [], byValue: {} }; facts.push(byFact[name]); }
        var entry = byFact[name];
        entry.conclusion = spec.conclusion;
        if (!entry.byValue[value]) {
          entry.byValue[value] = { value: value, who: [], first: "line " + lines[i].no,
                                   line: Array.from(text).slice(0, rules.text_max).join("") };
          entry.values.push(entry.byValue[value]);
        }
        if (entry.byValue[value].who.indexOf(who) < 0) entry.byValue[value].who.push(who);
      }
    }
    return facts.filter(function (e) { return e.values.length > 1; }).map(function (e) {
      return { fact: e.fact, conclusion: e.conclusion, values: e.values.map(function (v) {
        return { value: v.value, who: v.who.slice(0, rules.max_shown),
                 more: Math.max(0, v.who.length - rules.max_shown), first: v.first, line: v.line };
      }) };
    });
  };

  // -- series.py: the metric lines read as series per rank, and what they show --

  function median(values) {
    var sorted = values.slice().sort(function (a, b) { return a - b; }), half = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2;
  }
  function round4(value) { return value === null ? null : Number(value.toPrecision(4)); }
  function quarters(points) { // series._quarters: a quarter's size, the first and last quarters' means
    var q = Math.max(1, Math.floor(points.length / 4));
    return [q, mean(points.slice(0, q)), mean(points.slice(-q))];
  }
  function mean(points) { return points.reduce(function (a, p) { return a + p.value; }, 0) / points.length; }
  function printed(text) { // series.number: 1,234.5; nan and inf as themselves
    var plain = text.replace(/,/g, ""), low = plain.toLowerCase();
    if (/^[-+]?nan$/.test(low)) return NaN;
    if (/^[-+]?inf$/.test(low)) return low.charAt(0) === "-" ? -Infinity : Infinity;
    var value = Number(plain);
    return plain === "" || isNaN(value) ? null : value;
  }
  function nonFiniteName(value) { return isNaN(value) ? "NaN" : value < 0 ? "-Inf" : "Inf"; }

  // series.Series.see for every line: {values: [{metric, who, points}], schedule}
  Engine.prototype.seriesOf = function (lines) {
    var rules = this.data.series, byKey = {}, values = [], schedule = "";
    for (var i = 0; i < lines.length; i++) {
      var text = lines[i].text, lowered = text.toLowerCase();
      if (!schedule && this.schedule.test(text)) schedule = Array.from(text.trim()).slice(0, 120).join("");
      if (!rules.needles.some(function (n) { return lowered.indexOf(n) >= 0; })) continue;
      var who = null, taken = {};
      for (var m = 0; m < this.metrics.length; m++) {
        var spec = this.metrics[m].spec;
        if (taken[spec.metric] || lowered.indexOf(spec.needle) < 0) continue;
        var found = this.metrics[m].re.exec(text);
        var value = found ? printed(found[1]) : null;
        if (value === null) continue;
        taken[spec.metric] = true;
        if (spec.invert) {
          if (value <= 0) continue;
          value = 1 / value;
        }
        value *= spec.scale === undefined ? 1 : spec.scale;
        if (spec.units) value *= this.data.series.units[found[2]];
        if (who === null) who = this.rankOrHost(lines[i].raw);
        var key = spec.metric + "\u0000" + who;
        if (!byKey[key]) { byKey[key] = { metric: spec.metric, who: who, points: [] }; values.push(byKey[key]); }
        byKey[key].points.push({ value: value, where: "line " + lines[i].no });
      }
    }
    return { values: values, schedule: schedule };
  };

  // -- stacks.py: pasted py-spy, faulthandler and gdb dumps, classified like the stack check --

  function stackPathFunc(f) { // stackframes.path_func
    var path = String(f.filename || "").replace(/\\/g, "/"), name = String(f.name || "");
    return [path, name.slice(name.lastIndexOf(".") + 1)];
  }

  // checks/facts/stackframes.classify: (waits, op) of a thread, innermost frame first
  Engine.prototype.classifyFrames = function (frames) {
    var rules = this.data.stacks.frames, soFile = this.soFile, pathFunc = stackPathFunc;
    function endsWithAny(path, suffixes) {
      return (suffixes || []).some(function (s) { return path.slice(-s.length) === s; });
    }
    for (var i = 0; i < frames.length; i++) {
      var pf = pathFunc(frames[i]);
      for (var r = 0; r < rules.rules.length; r++) {
        var rule = rules.rules[r];
        if (rule.funcs.indexOf(pf[1]) < 0) continue;
        if (endsWithAny(pf[0], rule.suffix) ||
            (rule.contains || []).some(function (c) { return pf[0].indexOf(c) >= 0; })) {
          return [rule.waits, rule.op.replace("{func}", pf[1])];
        }
      }
    }
    for (var n = 0; n < frames.length; n++) {
      var f = frames[n];
      if (!(f.module || soFile.test(String(f.filename)))) continue;
      var name = String(f.name || "");
      for (var k = 0; k < this.nativeRules.length; k++) {
        if (this.nativeRules[k].re.test(name)) {
          return [this.nativeRules[k].rule.waits, this.nativeRules[k].rule.op || name.split("(")[0]];
        }
      }
    }
    for (var o = 0; o < frames.length; o++) {
      var io = pathFunc(frames[o]);
      var base = io[0].slice(io[0].lastIndexOf("/") + 1);
      if (rules.io_funcs.indexOf(io[1]) >= 0 && (rules.io_files.indexOf(base) >= 0 || endsWithAny(io[0], rules.io_suffixes))) {
        return ["io", io[1]];
      }
    }
    return ["running", null];
  };

  // stacks.Stacks.see for every line: the processes and their threads
  Engine.prototype.stackProcesses = function (lines) {
    var st = this.data.stacks, re = this.stackRe, processes = [], byWho = {}, total = 0;
    var thread = null, proc = null, format = "", loose = [], self = this;
    function processFor(raw, pidLabel) {
      var rank = self.lineRank.exec(raw.slice(0, 200)), who = null;
      if (rank) for (var g = 1; g < rank.length; g++) if (rank[g] !== undefined) { who = "rank " + parseInt(rank[g], 10); break; }
      if (who === null) who = pidLabel || "process " + (processes.length + 1);
      if (byWho[who] && byWho[who].threads.length) who = who + " (<pasted>:" + (processes.length + 1) + ")";
      var p = { who: who, pid: null, threads: [], lastIsMain: false };
      if (!byWho[who]) processes.push(p); else processes[processes.indexOf(byWho[who])] = p;
      byWho[who] = p;
      return p;
    }
    function mayBeFrame(text) { // stacks._may_be_frame
      if (text.indexOf("(") >= 0 && (text.indexOf(".py") >= 0 || text.indexOf(".so") >= 0)) return true;
      return text.indexOf("line ") >= 0 || /^\s*#/.test(text);
    }
    function frameOf(text) {
      var m = re.fault_frame.exec(text);
      if (m) return { filename: m[1], line: parseInt(m[2], 10), name: m[3] };
      m = re.pyspy_frame.exec(text);
      if (m) {
        var frame = { filename: m[2], name: m[1] };
        if (m[3]) frame.line = parseInt(m[3], 10);
        else if (m[2].slice(-3) !== ".py") frame.module = m[2];
        return frame;
      }
      m = /^\s*#/.test(text) ? re.gdb_frame.exec(text) : null;
      if (m) return { filename: m[2] || "", name: m[1], module: m[2] || "?" };
      return null;
    }
    function header(line) {
      var text = line.text, m;
      if (text.indexOf("hread ") < 0 && text.indexOf("Process ") < 0) return false;
      m = re.process.exec(text);
      if (m) {
        thread = null;
        proc = processFor(line.raw, "pid " + m[1]);
        proc.pid = m[1];
        format = "";
        return true;
      }
      var fmt = null;
      ["pyspy_thread", "fault_thread", "gdb_thread"].some(function (name) {
        m = re[name].exec(text);
        if (m) fmt = name;
        return !!m;
      });
      if (!fmt) return false;
      if (total >= st.max_threads) { thread = null; return true; }
      total += 1;
      var name, ident, hint, idle = null;
      if (fmt === "pyspy_thread") {
        name = m[3] || ""; ident = m[1];
        hint = name === "MainThread" || (proc !== null && proc.pid !== null && m[1] === proc.pid);
        idle = m[2] === "idle";
      } else if (fmt === "fault_thread") {
        name = m[1]; ident = m[2]; hint = m[1] === "Current thread";
      } else {
        name = "Thread " + m[1]; ident = m[2]; hint = m[1] === "1";
      }
      var repeats = proc !== null && proc.threads.some(function (t) { return t.ident === ident; });
      var secondMain = fmt === "pyspy_thread" && name === "MainThread" && proc !== null &&
        proc.threads.some(function (t) { return t.name === "MainThread"; }); // stacks._has_main
      if (proc === null || (format !== "" && format !== fmt) || format === "headless" ||
          (fmt !== "pyspy_thread" && repeats) || secondMain) {
        proc = processFor(line.raw, "");
      }
      format = fmt;
      proc.lastIsMain = fmt === "fault_thread";
      thread = { name: name, ident: ident, hint: hint, frames: [], where: "line " + line.no, idle: idle };
      proc.threads.push(thread);
      return true;
    }
    function headless(frame, line) { // stacks.Stacks._headless
      if (frame === null) { if (line.text.trim()) loose = []; return; }
      loose.push({ frame: frame, line: line });
      if (loose.length < st.headless_run || total >= st.max_threads) return;
      total += 1;
      proc = processFor(loose[0].line.raw, "");
      format = "headless";
      thread = { name: "", ident: "", hint: true, where: "line " + loose[0].line.no, idle: null,
                 frames: loose.map(function (l) { return l.frame; }) };
      proc.threads.push(thread);
      loose = [];
    }
    lines.forEach(function (line) {
      if (header(line)) { loose = []; return; }
      var frame = mayBeFrame(line.text) ? frameOf(line.text) : null;
      if (thread === null) { headless(frame, line); return; }
      if (frame === null) { if (line.text.trim()) thread = null; return; }
      if (thread.frames.length < st.max_frames) thread.frames.push(frame);
    });
    return processes;
  };

  // stacks._main: the process's main thread (py-spy names it; else the thread threading did not start)
  function stackMain(p) {
    var threads = p.threads.filter(function (t) { return t.frames.length; });
    if (!threads.length) return null;
    var named = threads.filter(function (t) { return t.hint && t.name === "MainThread"; })[0];
    if (named) return named;
    var notStarted = threads.filter(function (t) {
      var pf = stackPathFunc(t.frames[t.frames.length - 1]);
      return !(pf[0].slice(-"threading.py".length) === "threading.py" && pf[1].indexOf("_bootstrap") === 0);
    });
    if (!notStarted.length && p.threads.length > 1) return null;
    if (!notStarted.length) notStarted = threads;
    return notStarted.filter(function (t) { return t.hint; })[0] ||
      (p.lastIsMain ? notStarted[notStarted.length - 1] : notStarted[0]);
  }

  // stacks.Stacks.readings: the processes' telling threads compared, most telling first
  Engine.prototype.stackReadings = function (lines) {
    var st = this.data.stacks, self = this, mains = [], address = this.frameAddress;
    function namesAWait(t) { // stacks._names_a_wait
      var wait = self.classifyFrames(t.frames)[0];
      return st.wait_conclusions[wait] !== undefined && !(st.idle_only.indexOf(wait) >= 0 && t.idle === false);
    }
    var processes = this.stackProcesses(lines);
    processes.forEach(function (p) {
      var main = stackMain(p), telling = main;
      if (!(main !== null && namesAWait(main))) {
        telling = p.threads.filter(function (t) { return t.frames.length && t !== main && namesAWait(t); })[0] || main;
      }
      if (telling) mains.push({ who: p.who, thread: telling, wait: self.classifyFrames(telling.frames) });
    });
    function unnamed(count) { // stacks._unnamed: a guess, said as one
      return { reading: "stack-unnamed", conclusion: st.guess, guess: true, first: null, facts: { count: count } };
    }
    if (!mains.length) {
      var dumped = processes.filter(function (p) { return p.threads.some(function (t) { return t.frames.length; }); }).length;
      return dumped ? [unnamed(dumped)] : [];
    }
    function shown(whos) {
      var text = whos.slice(0, 6).join(", ");
      return text + (whos.length > 6 ? " (+" + (whos.length - 6) + ")" : "");
    }
    var out = [], ops = [];
    mains.forEach(function (m) {
      var op = m.wait[1] || "";
      if (m.wait[0] === "collective" && ops.indexOf(op) < 0) ops.push(op);
    });
    ops.sort();
    if (ops.length > 1) {
      var groups = ops.map(function (op) {
        return op + " on " + shown(mains.filter(function (m) { return m.wait[0] === "collective" && (m.wait[1] || "") === op; })
          .map(function (m) { return m.who; }));
      }).join("; ");
      out.push({ reading: "stack-mismatch", conclusion: st.mismatch, first: null, facts: { groups: groups } });
    }
    var keys = [], byKey = {};
    mains.forEach(function (m) {
      var key = m.wait[0] + "\u0000" + (m.wait[1] === null ? "\u0001" : m.wait[1]);
      if (!byKey[key]) { byKey[key] = []; keys.push(key); }
      byKey[key].push(m);
    });
    keys.sort(function (a, b) {
      return (byKey[b].length - byKey[a].length) || (byKey[a][0].wait[0] < byKey[b][0].wait[0] ? -1 :
        byKey[a][0].wait[0] > byKey[b][0].wait[0] ? 1 : 0);
    });
    keys.forEach(function (key) {
      var group = byKey[key], thread = group[0].thread, wait = group[0].wait[0];
      var inWorker = thread.frames.some(function (f) {
        var pf = stackPathFunc(f);
        return pf[0].slice(-st.worker_frame[0].length) === st.worker_frame[0] && pf[1] === st.worker_frame[1];
      });
      var kind = wait === "lock" && inWorker ? "lock-in-worker" : wait;
      if (st.idle_only.indexOf(kind) >= 0 && thread.idle === false) kind = "running";
      var top = thread.frames.filter(function (f) { return !address.test(String(f.name)); })[0] ||
        thread.frames[0];  // stacks._frame_text: the innermost frame with a name
      var namedBy = wait === "collective" && ops.length > 1 ? null : st.wait_conclusions[kind] || null;
      out.push({ reading: "stack-wait", conclusion: namedBy, first: thread.where,
                 facts: { waits: wait, op: group[0].wait[1] || "", count: group.length, total: mains.length,
                          thread: thread.name, who: shown(group.map(function (m) { return m.who; })),
                          frame: top.name + " (" + top.filename + (top.line ? ":" + top.line : "") + ")" } });
    });
    var named = out.filter(function (r) { return r.conclusion; });
    var guess = !named.length && mains.some(function (m) { return m.thread.idle !== false; }) ? [unnamed(mains.length)] : [];
    return named.concat(out.filter(function (r) { return !r.conclusion; }), guess);
  };

  // series.read_series: the readings, most telling first
  Engine.prototype.readings = function (lines) {
    var rules = this.data.series.rules, conclusions = this.data.series.conclusions;
    var order = this.data.series.order, seen = this.seriesOf(lines), out = [];
    function reading(kind, first, facts) {
      return { reading: kind, conclusion: conclusions[kind], first: first, facts: facts };
    }
    var whos = {};
    seen.values.forEach(function (s) { whos[s.who] = true; });
    var named = Object.keys(whos).length > 1;
    seen.values.forEach(function (s) {
      var who = named ? s.who : "", points = s.points;
      if (s.metric === "loss") {
        var bad = -1;
        for (var b = 0; b < points.length; b++) if (!isFinite(points[b].value)) { bad = b; break; }
        if (bad === 0) {
          out.push(reading("loss-nonfinite-from-start", points[0].where, { who: who,
            value: nonFiniteName(points[0].value), at: points[0].where }));
          return;
        }
        if (bad > 0) {
          out.push(reading("loss-nonfinite", points[bad].where, { who: who, value: nonFiniteName(points[bad].value),
            at: points[bad].where, finite: bad, last: round4(points[bad - 1].value) }));
          return;
        }
        var jump = this.lossJump(points, rules); // series._jump: one step's jump that stays up
        if (jump > 0) {
          out.push(reading("loss-jumps", points[jump].where, { who: who, before: round4(points[jump - 1].value),
            after: round4(points[jump].value), at: points[jump].where,
            ratio: Math.round(points[jump].value / points[jump - 1].value * 10) / 10 }));
          return;
        }
        if (points.length < rules.min_points) return;
        var qs = quarters(points), quarter = qs[0], start = qs[1], end = qs[2];
        var low = Math.min.apply(null, points.map(function (p) { return p.value; }));
        if (start > 0 && low > 0 && end >= rules.climb_ratio * start && end >= rules.climb_over_min * low) {
          out.push(reading("loss-climbs", points[points.length - quarter].where, { who: who, start: round4(start),
            end: round4(end), low: round4(low), count: points.length }));
        } else if (end <= start * (1 + rules.steady_rise) || end <= low * rules.steady_over_min) {
          out.push(reading("loss-steady", points[0].where, { who: who, start: round4(points[0].value),
            end: round4(points[points.length - 1].value), count: points.length }));
        }
      } else if (s.metric === "lr") {
        var zeros = 0, rest = {};
        while (zeros < points.length && points[zeros].value === 0) zeros += 1;
        points.slice(zeros).forEach(function (p) { rest[p.value] = true; });
        if (points.length >= rules.min_points && zeros >= rules.lr_zero_run && zeros < points.length - 1
            && Object.keys(rest).length === 1) { // series._lr: 0, then one value to the end
          out.push(reading("lr-zero-then-constant", points[zeros].where, { who: who, zeros: zeros,
            value: round4(points[zeros].value), count: points.length - zeros }));
          return;
        }
        var distinct = {};
        points.forEach(function (p) { distinct[p.value] = true; });
        if (points.length < rules.min_points || Object.keys(distinct).length !== 1) return;
        if (points[0].value === 0) out.push(reading("lr-zero", points[0].where, { who: who, count: points.length }));
        else if (seen.schedule && points.length >= rules.lr_min_points) {
          out.push(reading("lr-constant", points[0].where, { who: who, value: round4(points[0].value),
            count: points.length, schedule: seen.schedule }));
        }
      } else if (s.metric === "step_time") {
        var spikes = this.spikes(points, who, rules);
        if (spikes) out.push(reading("step-spikes", spikes.first, spikes.facts));
      } else if (s.metric === "loss_scale") { // series._scale
        var drops = 0, last = points[points.length - 1];
        for (var d = 1; d < points.length; d++) if (points[d].value < points[d - 1].value) drops += 1;
        if ((drops >= rules.scale_drops && last.value <= rules.scale_low)
            || (drops >= rules.scale_run_drops && points[0].value <= rules.scale_run_start)) {
          out.push(reading("loss-scale-collapses", last.where, { who: who, drops: drops,
            start: points[0].value, end: last.value }));
        } else if (drops >= rules.scale_settle_drops && last.value >= rules.scale_settled) {
          out.push(reading("loss-scale-settles", last.where, { who: who, drops: drops,
            start: points[0].value, end: last.value }));
        }
      } else if (s.metric === "host_rss") { // series._rss
        if (points.length < rules.min_points) return;
        var rq = quarters(points), first = rq[1], final = rq[2];
        if (final >= rules.rss_ratio * first && final - first >= rules.rss_growth_gib) {
          out.push(reading("host-memory-grows", points[points.length - 1].where, { who: who,
            start: round4(points[0].value), end: round4(points[points.length - 1].value), count: points.length }));
        }
      }
    }, this);
    this.kvStuck(seen.values, rules).forEach(function (r) { out.push(reading("kv-cache-stuck", r.first, r.facts)); });
    [["step_time", "higher"], ["throughput", "lower"]].forEach(function (pair) {
      var slow = this.slowRank(seen.values, pair[0], pair[1], rules);
      if (slow) out.push(reading("slow-rank", slow.first, slow.facts));
    }, this);
    out.sort(function (a, b) { return order.indexOf(a.reading) - order.indexOf(b.reading); });
    var healthy = this.data.series.healthy;
    var problems = out.filter(function (r) { return healthy.indexOf(r.reading) < 0; });
    return problems.length ? problems : out.slice(0, 1);
  };

  // series._jump: the index of a value jump_ratio times the one before, no later value back under
  // half of it; 0 without one (finite values only: a NaN loss is read before)
  Engine.prototype.lossJump = function (points, rules) {
    for (var i = 1; i < points.length; i++) {
      var before = points[i - 1].value, after = points[i].value;
      if (before >= rules.jump_from && after >= rules.jump_ratio * before &&
          points.slice(i + 1).every(function (p) { return p.value >= after / 2; })) return i;
    }
    return 0;
  };

  // series._kv_stuck: vLLM's KV cache was full, and the last stats lines wait with none running
  Engine.prototype.kvStuck = function (values, rules) {
    var out = [], byKey = {};
    values.forEach(function (s) { byKey[s.metric + "\u0000" + s.who] = s.points; });
    values.forEach(function (s) {
      if (s.metric !== "kv_usage") return;
      var running = byKey["running\u0000" + s.who] || [], waiting = byKey["waiting\u0000" + s.who] || [];
      var tail = rules.kv_stuck_lines, full = null;
      for (var f = 0; f < s.points.length && full === null; f++) if (s.points[f].value >= rules.kv_full_pct) full = s.points[f];
      if (full === null || running.length < tail || running.length !== waiting.length) return;
      var stuck = 0;
      for (var i = running.length - 1; i >= 0 && running[i].value === 0 && waiting[i].value >= 1; i--) stuck += 1;
      if (stuck < tail) return;
      out.push({ first: waiting[waiting.length - stuck].where, facts: { who: s.who, peak: round4(full.value),
        at: full.where, count: stuck, waiting: round4(waiting[waiting.length - 1].value) } });
    });
    return out;
  };

  Engine.prototype.spikes = function (everyStep, who, rules) {
    var points = everyStep.slice(rules.spike_warmup);
    if (points.length < rules.spike_min_points) return null;
    var sorted = points.map(function (p) { return p.value; }).sort(function (a, b) { return a - b; });
    var typical = sorted[Math.floor((points.length - 1) / 4)]; // the lower quartile
    if (typical <= 0) return null;
    var at = [];
    points.forEach(function (p, i) { if (p.value >= rules.spike_ratio * typical) at.push(i); });
    if (at.length < rules.spike_min || at.length > rules.spike_max_share * points.length) return null;
    var counts = {}, gaps = [];
    for (var g = 1; g < at.length; g++) {
      var gap = at[g] - at[g - 1];
      if (!counts[gap]) { counts[gap] = 0; gaps.push(gap); }
      counts[gap] += 1;
    }
    var every = gaps[0];
    gaps.forEach(function (gap) { if (counts[gap] > counts[every]) every = gap; });
    if (every < 2 || counts[every] < rules.spike_regular_share * (at.length - 1)) return null;
    var others = points.filter(function (p, i) { return at.indexOf(i) < 0; })
      .map(function (p) { return p.value; });
    return { first: points[at[0]].where, facts: { who: who, every: every,
      spike: round4(median(at.map(function (i) { return points[i].value; }))), median: round4(median(others)),
      count: at.length, points: everyStep.length } };
  };

  Engine.prototype.slowRank = function (values, metric, slowerIs, rules) {
    var per = [], byWho = {};
    values.forEach(function (s) {
      if (s.metric === metric && s.who && s.points.length >= rules.slow_min_points) {
        byWho[s.who] = median(s.points.map(function (p) { return p.value; }));
        per.push(s);
      }
    });
    if (per.length < 2) return null;
    var slow = per[0];
    per.forEach(function (s) {
      if (slowerIs === "higher" ? byWho[s.who] > byWho[slow.who] : byWho[s.who] < byWho[slow.who]) slow = s;
    });
    var others = median(per.filter(function (s) { return s !== slow; }).map(function (s) { return byWho[s.who]; }));
    if (others <= 0 || byWho[slow.who] <= 0) return null;
    var ratio = slowerIs === "higher" ? byWho[slow.who] / others : others / byWho[slow.who];
    if (ratio < rules.slow_ratio) return null;
    return { first: slow.points[0].where, facts: { slow: slow.who, metric: metric, value: round4(byWho[slow.who]),
      others: round4(others), peers: per.length - 1, ratio: Math.round(ratio * 100) / 100 } };
  };

  // series.describe_reading: one clause in the page's language
  Engine.prototype.describeReading = function (reading, lang) {
    if (reading.reading === "differs") return this.describeDifferences([reading.facts.difference], lang);
    var stackText = this.data.stacks.texts[reading.reading];
    if (stackText) {
      return stackText[lang].replace(/\{(\w+)\}/g, function (_, name) {
        var value = reading.facts[name];
        return name === "op" ? (value ? " " + value : "") : String(value);  // stacks.describe_reading
      });
    }
    var endText = this.data.logends.texts[reading.reading];
    if (endText) return endText[lang].replace("{last}", reading.facts.last); // logends.describe_reading
    var linkText = this.data.topology.texts[reading.reading];
    if (linkText) { // topology.describe_reading
      return linkText[lang].replace(/\{(\w+)\}/g, function (_, name) { return String(reading.facts[name]); });
    }
    var series = this.data.series, facts = {};
    Object.keys(reading.facts).forEach(function (k) { facts[k] = reading.facts[k]; });
    if ("metric" in facts) facts.metric = series.metric_names[facts.metric][lang];
    if ("who" in facts) facts.who = facts.who ? (lang === "zh" ? "（" + facts.who + "）" : " (" + facts.who + ")") : "";
    return series.texts[reading.reading][lang].replace(/\{(\w+)\}/g, function (_, name) {
      return String(facts[name]);
    });
  };

  // advice.shape_of: the first shape of the exported rules that holds on the excerpt's tail
  var ADVICE_VERDICT = { unknown: "similar", "no-error": "no-error" }; // the page's names -> Python's
  Engine.prototype.shapeOf = function (lines, verdict) {
    var rules = this.data.advice;
    var tail = lines.slice(-rules.tail_lines).map(function (l) { return l.text; })
      .filter(function (t) { return t.trim(); });
    for (var i = 0; i < rules.shapes.length; i++) {
      var shape = rules.shapes[i], test = shape.test, re = shape.pattern ? new RegExp(shape.pattern) : null;
      var holds = test === "always" ? true
        : test === "none" ? tail.length === 0
        : test === "verdict" ? ADVICE_VERDICT[verdict] === shape.verdict
        : tail.length === 0 ? false
        : test === "last" ? re.test(tail[tail.length - 1])
        : test === "any" ? tail.some(function (t) { return re.test(t); })
        : test === "share" ? tail.filter(function (t) { return re.test(t); }).length >= shape.share * tail.length
        : false;
      if (holds) return shape;
    }
    return null;
  };

  Engine.prototype.scan = function (lines) {
    var kept = this.ranking.rules.lines.kept;
    var hits = [];
    for (var s = 0; s < this.signatures.length; s++) {
      var compiled = this.signatures[s];
      var hit = null;
      for (var i = 0; i < lines.length; i++) {
        if (!compiled.re.test(lines[i].text)) continue;
        if (hit === null) hit = { sig: compiled.sig, count: 0, first: [], last: [] };
        hit.count += 1;
        if (hit.first.length < kept) hit.first.push(lines[i]);
        hit.last.push(lines[i]);
        if (hit.last.length > kept) hit.last.shift();
      }
      if (hit !== null) hits.push(hit);
    }
    return hits;
  };

  // errorlines.ErrorLines.query_line: the last exception line, else error line, else traceback line
  // scan._see_errors and errorlines.ErrorLines: in each block of lines (as scan.py cuts them), the
  // last line of each group alike (digits masked); then the line to compare (the last exception,
  // else error, else traceback line) and what to compare: the line as shown, or for a traceback
  // cut before its exception, the library frames of its last `keep` lines
  Engine.prototype.errorQuery = function (lines) {
    var keep = this.data.errors.keep, kept = { exception: [], error: [], traceback: [] };
    for (var start = 0; start < lines.length;) {
      var end = start, size = 0;
      while (end < lines.length) {
        size += lines[end].raw.length;
        end += 1;
        if (end - start >= this.data.errors.block_lines || size >= this.data.errors.block_chars) break;
      }
      var last = Object.create(null), order = [];
      for (var i = start; i < end; i++) {
        var masked = lines[i].text.replace(/[0-9]/g, "0");
        if (!has(last, masked)) order.push(masked);
        last[masked] = i;
      }
      order.map(function (m) { return last[m]; }).sort(function (a, b) { return a - b; }).forEach(function (i) {
        var kind = this.errorKind(lines[i].text);
        if (kind) { kept[kind].push(lines[i]); if (kept[kind].length > keep) kept[kind].shift(); }
      }, this);
      start = end;
    }
    var line = kept.exception.concat(kept.error).length
      ? (kept.exception.length ? kept.exception : kept.error).slice(-1)[0]
      : kept.traceback.length ? kept.traceback[kept.traceback.length - 1] : null;
    var all = kept.exception.concat(kept.error, kept.traceback);
    if (line === null) return { line: null, text: null, kept: all };
    if (kept.exception.length || kept.error.length) return { line: line, text: this.shownText(line), kept: all };
    return { line: line, kept: all,
             text: kept.traceback.map(function (l) { return this.libraryFrame(this.shownText(l)); }, this).join(" ").trim() };
  };

  // scan._shown for a line kept as an error: as logged, without colours; a long one is its prefix
  // (rank, time) and the first text_max characters of the normalised line
  Engine.prototype.shownText = function (line) {
    var plain = this.stripAnsi(line.raw), raw = Array.from(plain), max = this.data.text_max;
    if (raw.length <= max) return plain;
    var text = Array.from(line.text), width = Math.max(0, Math.min(raw.length - text.length, 60));
    var prefix = plain.slice(plain.length - line.text.length) === line.text ? raw.slice(0, width).join("") : "";
    return prefix + text.slice(0, max).join("") + (max < text.length ? "…" : "");
  };

  // errorlines.library_frame: a frame as words (an installed package's module path and function,
  // an import's machinery as `import`, else the function unless every program has one)
  Engine.prototype.libraryFrame = function (text) {
    var e = this.data.errors, found = this.frameRe.exec(text);
    if (!found) return "";
    var path = found[1].replace(/\\/g, "/"), func = found[2].replace(/^[<>]+|[<>]+$/g, "");
    if (path.indexOf("<frozen importlib") === 0) return "import";
    for (var i = 0; i < e.library_roots.length; i++) {
      var at = path.lastIndexOf(e.library_roots[i]);
      if (at >= 0) {
        var module = path.slice(at + e.library_roots[i].length), dot = module.lastIndexOf(".");
        if (dot >= 0) module = module.slice(0, dot);
        return module.replace(/\//g, " ").replace(/_/g, " ") + " " + func.replace(/_/g, " ");
      }
    }
    return e.every_program.indexOf(func.replace(/^_+|_+$/g, "")) >= 0 ? "" : func.replace(/_/g, " ");
  };

  // errorlines.ErrorLines.any: some line reads as an exception, an error or a traceback's line
  Engine.prototype.anyErrorLike = function (lines) {
    return lines.some(function (line) { return this.errorKind(line.text) !== null; }, this);
  };

  // logends.readings: ordinary output that just stops names the stall (or an RL job's unknown stage)
  Engine.prototype.logEnds = function (lines) {
    var rules = this.data.logends.rules, re = this.logEndsRe;
    if (this.shapeOf(lines, "no-error").id !== rules.shape) return [];
    var tail = lines.slice(-this.data.advice.tail_lines).map(function (l) { return l.text; })
      .filter(function (t) { return re.word.test(t); });
    if (tail.length < rules.min_lines) return [];
    if (tail.slice(-rules.finished_lines).some(function (t) { return re.finished.test(t); })) return [];
    var links = this.topologyRegexes(); // topology.is_table: how the GPUs connect is no log
    if (tail.some(function (t) { return links.header.test(t) || links.bandwidth.test(t); })) return [];
    var recent = tail.slice(-rules.pointed_lines);
    if (recent.some(function (t) { return re.pointed.test(t); })) return [];
    if (recent.filter(function (t) { return re.values.test(t); }).length >= rules.values_min) return [];
    var raw = lines.slice(-this.data.advice.tail_lines).map(function (l) { return l.raw; }); // scan.raw_tail
    var rl = tail.concat(raw).some(function (t) { return re.rl.test(t); });
    var kind = this.ncclTestsStalled(tail) ? "log-stops-nccl-tests" : rl ? "log-stops-rl" : "log-stops";
    var last = Array.from(tail[tail.length - 1].trim());
    last = last.length > rules.last_chars ? last.slice(0, rules.last_chars - 3).join("") + "..." : last.join("");
    return [{ reading: kind, conclusion: this.data.logends.conclusions[kind], guess: true, first: null,
              facts: { last: last } }];
  };

  // logends._nccl_tests_stalled: nccl-tests' output on at most one host, with no row of results yet
  Engine.prototype.ncclTestsStalled = function (tail) {
    var re = this.logEndsRe, hosts = Object.create(null);
    if (!tail.some(function (t) { return re.ncclTests.test(t); })) return false;
    if (tail.some(function (t) { return re.ncclTestsRow.test(t); })) return false;
    tail.forEach(function (t) {
      re.ncclTestsHost.lastIndex = 0;
      for (var m = re.ncclTestsHost.exec(t); m; m = re.ncclTestsHost.exec(t)) hosts[m[1]] = true;
    });
    return Object.keys(hosts).length <= 1;
  };

  // topology.readings: a pasted P2P bandwidth test slower with P2P on, then a PCIe-only topology matrix
  Engine.prototype.topologyRegexes = function () {
    var t = this.data.topology;
    if (!this.topologyRe) {
      this.topologyRe = { header: regex(t.header), row: regex(t.row), nvlink: regex(t.nvlink),
                          bandwidth: regex(t.bandwidth), matrixRow: regex(t.matrix_row),
                          copy: regex(t.copy) };
    }
    return this.topologyRe;
  };

  Engine.prototype.topologyReadings = function (lines) {
    var t = this.data.topology, rules = t.rules, re = this.topologyRegexes();
    var texts = lines.slice(-this.data.advice.tail_lines).map(function (l) { return l.text; });
    var out = [], medians = {};
    texts.forEach(function (text, at) {
      var m = re.bandwidth.exec(text);
      if (!m || medians[m[1]] !== undefined) return;
      var values = [];
      for (var i = at + 2; i < Math.min(texts.length, at + 66); i++) { // past the `D\D` header
        var row = re.matrixRow.exec(texts[i]);
        if (!row) break;
        var device = Number(row[1]);
        row[2].trim().split(/\s+/).forEach(function (v, j) { if (j !== device) values.push(Number(v)); });
      }
      if (values.length) medians[m[1]] = median(values);
    });
    var on = medians.Enabled, off = medians.Disabled;
    if (on !== undefined && off !== undefined && on <= rules.slower_ratio * off) {
      out.push({ reading: "p2p-slower", conclusion: t.conclusions["p2p-slower"], first: null,
                 facts: { enabled: pyRound(on, 2), disabled: pyRound(off, 2) } });
    }
    for (var at = 0; at < texts.length; at++) {
      var header = re.header.exec(texts[at]);
      if (!header) continue;
      var gpus = header[0].trim().split(/\s+/).length, links = [];
      for (var k = at + 1; k < Math.min(texts.length, at + 1 + gpus); k++) {
        var r = re.row.exec(texts[k]);
        if (!r) break;
        var self = Number(r[1]);
        r[2].trim().split(/\s+/).filter(Boolean).slice(0, gpus).forEach(function (c, j) {
          if (j !== self && c !== "X") links.push(c);
        });
      }
      var pcie = links.length && gpus >= 2 && !links.some(function (c) { return re.nvlink.test(c); }) &&
        links.every(function (c) { return rules.pcie.indexOf(c) >= 0; });
      if (pcie) {
        out.push({ reading: "topo-pcie", conclusion: t.conclusions["topo-pcie"], first: null, guess: true,
                   facts: { gpus: gpus, links: rules.pcie.filter(function (k) { return links.indexOf(k) >= 0; })
                     .join(", ") } });
      }
      break; // the first matrix only
    }
    var lost = this.copyZeros(texts.join("\n"));
    if (lost) out.push({ reading: "copy-zeros", conclusion: t.conclusions["copy-zeros"], first: null, facts: lost });
    return out;
  };

  // topology._copy_zeros: a tensor copied to another GPU reads zeros where its values were seen
  Engine.prototype.copyZeros = function (text) {
    var t = this.data.topology, rules = t.rules;
    if (!this.topologyRegexes().copy.test(text)) return null;
    var all = function (spec) { return regex(spec, "g"); }; // finditer
    var values = function (s) { return s.match(all(t.value)) || []; };
    var vanishes = function (v) { var n = Number(v); return n === n && Math.abs(n) < rules.vanishing; };
    var devices = {}, m, re = all(t.device);
    while ((m = re.exec(text)) !== null) devices[m.slice(1).filter(Boolean)[0]] = true;
    if (Object.keys(devices).length < 2) return null;
    var printed = [], seen = [];
    re = all(t.printed);
    while ((m = re.exec(text)) !== null) printed.push({ values: values(m[1]), device: m[2] });
    printed.forEach(function (p) { seen.push(p.values); });
    re = all(t.literal);
    while ((m = re.exec(text)) !== null) seen.push(values(m[1]));
    for (var i = 0; i < printed.length; i++) {
      var p = printed[i];
      if (p.values.length < rules.min_values || !p.values.every(vanishes)) continue;
      for (var j = 0; j < seen.length; j++) {
        var other = seen[j];
        if (other.length === p.values.length && !other.every(vanishes)) {
          return { device: Number(p.device), count: p.values.length,
                   seen: other.slice(0, rules.seen_values).join(", ") + (other.length > rules.seen_values ? ", ..." : "") };
        }
      }
    }
    return null;
  };

  // spread.as_readings: each difference as a guess at the conclusion it points to
  Engine.prototype.differenceReadings = function (differences) {
    return differences.map(function (diff) {
      return { reading: "differs", conclusion: diff.conclusion, facts: { difference: diff }, guess: true };
    });
  };

  // spread.describe: which facts differ, and who has which value
  Engine.prototype.describeDifferences = function (differences, lang) {
    var zh = lang === "zh";
    var parts = differences.map(function (diff) {
      var held = diff.values.map(function (item) {
        var who = item.who.join(", ") + (item.more ? " (+" + item.more + ")" : "");
        return zh ? item.value + "（" + who + "）" : item.value + " on " + who;
      });
      return zh ? diff.fact + "：" + held.join("；") : diff.fact + ": " + held.join("; ");
    });
    return zh ? "各主机/rank 之间不一致——" + parts.join("；") : "differs across hosts/ranks: " + parts.join(" | ");
  };

  // verdict.from_readings: a match per conclusion the readings name (a healthy reading makes none here)
  Engine.prototype.fromReadings = function (readings) {
    var knockOns = this.data.ranking.evidence.reading.knock_on, healthy = this.data.series.healthy;
    var out = [], seen = {};
    readings.forEach(function (reading) {
      var key = reading.conclusion;
      if (!key || seen[key] || healthy.indexOf(reading.reading) >= 0 || !this.data.conclusions[key]) return;
      seen[key] = true;
      out.push(this.readingMatch(reading, knockOns.indexOf(key) >= 0 ? "knock-on" : "cause"));
    }, this);
    return out;
  };

  // verdict.healthy: the first reading that says the numbers look well, as the answer where nothing
  // else was found
  Engine.prototype.healthyMatches = function (readings) {
    var healthy = this.data.series.healthy, conclusions = this.data.conclusions;
    var reading = readings.filter(function (r) {
      return healthy.indexOf(r.reading) >= 0 && r.conclusion && conclusions[r.conclusion];
    })[0];
    return reading ? [this.readingMatch(reading, "healthy")] : [];
  };

  // verdict._reading_match: the match of the conclusion a reading names, in `role`
  Engine.prototype.readingMatch = function (reading, role) {
    var key = reading.conclusion, parts = key.split(":");
    return { key: key, runbook: parts[0], conclusion: parts[1], info: this.data.conclusions[key], role: role,
             generic: false, score: 0, first: null, hits: [], time: null, lines: [], reading: reading,
             confidence: this.ranking.confidence("reading", { guess: !!reading.guess }, role) };
  };

  // verdict.rank: one match per (runbook, conclusion), in the ranking's order
  Engine.prototype.rank = function (hits, lines) {
    var groups = {}, keys = [];
    hits.forEach(function (hit) {
      var key = hit.sig.runbook + ":" + hit.sig.conclusion;
      if (!groups[key]) { groups[key] = []; keys.push(key); }
      groups[key].push(hit);
    });
    var roles = {};
    keys = this.refine(groups, keys, roles);
    var bugs = this.releaseBugs(lines, hits), target = this.releaseRefine(groups, keys, bugs);
    if (target !== null) keys = target.keys;
    var matches = keys.map(function (key) { return this.match(key, groups[key], lines, roles[key]); }, this);
    matches.forEach(function (m) {
      if (target === null || m.key !== target.key) return;
      var texts = this.hitTexts(groups[m.key]);
      m.release = bugs.filter(function (b) { return this.showsBug(b, texts); }, this)[0] || bugs[0];
    }, this);
    return this.ranking.order(matches);
  };

  // -- releases.py: a confirmed bug of the NCCL release the log states, shown by its own lines --

  function versionTuple(text) { // _regressions.version_tuple
    var found = /^(\d+(?:\.\d+){0,3})/.exec(String(text || "").trim());
    if (!found) return null;
    var parts = found[1].split(".").map(Number);
    while (parts.length < 3) parts.push(0);
    return parts;
  }

  function compareVersions(a, b) {
    for (var i = 0; i < Math.max(a.length, b.length); i++) {
      var x = i < a.length ? a[i] : -1, y = i < b.length ? b[i] : -1; // Python compares tuples so
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  }

  function satisfies(version, specs) { // _regressions.satisfies: every specifier holds
    var have = versionTuple(version);
    return have !== null && specs.every(function (spec) {
      var m = /^(==|!=|>=|<=|>|<)(.*)$/.exec(spec), c = compareVersions(have, versionTuple(m[2]));
      return { "==": c === 0, "!=": c !== 0, ">=": c >= 0, "<=": c <= 0, ">": c > 0, "<": c < 0 }[m[1]];
    });
  }

  // hits.LineHit.whole: a kept line as logged; a long one as normalised, up to full_max characters
  Engine.prototype.whole = function (line) {
    if (Array.from(line.raw).length > this.data.text_max) return Array.from(line.text).slice(0, this.data.full_max).join("");
    return this.shownText(line);
  };

  Engine.prototype.hitTexts = function (hits) {
    var out = [];
    hits.forEach(function (h) { h.first.concat(h.last).forEach(function (l) { out.push(this.whole(l)); }, this); }, this);
    return out;
  };

  Engine.prototype.releaseRegex = function (pattern) {
    this.releaseRes = this.releaseRes || Object.create(null);
    if (!has(this.releaseRes, pattern)) {
      try { this.releaseRes[pattern] = new RegExp(pattern); } catch (err) { this.releaseRes[pattern] = null; }
    }
    return this.releaseRes[pattern];
  };

  // releases.Releases.bugs: the table's rows a stated version is affected by and whose lines the
  // excerpt's last lines, error lines and matched lines all hold (_regressions.match)
  Engine.prototype.releaseBugs = function (lines, hits) {
    var r = this.data.releases, versions = [];
    if (!r) return [];
    lines.forEach(function (line) {
      var low = line.text.toLowerCase();
      r.versions.forEach(function (v) {
        if (low.indexOf(v.needle) < 0) return;
        var re = regex(v.regex, "g"), m;
        while ((m = re.exec(line.text)) !== null) if (versions.indexOf(m[1]) < 0) versions.push(m[1]);
      });
    });
    if (!versions.length) return [];
    var texts = lines.slice(-this.data.advice.tail_lines).map(function (l) { return l.text; })
      .concat(this.errorQuery(lines).kept.map(this.whole, this), this.hitTexts(hits));
    var out = [];
    r.rows.forEach(function (row) {
      var version = row.affected ? versions.filter(function (v) { return satisfies(v, row.affected); })[0] : versions[0];
      if (version === undefined) return;
      var found = (row.log_all || []).every(function (p) { return this.anyText(p, texts); }, this);
      if (found) out.push(Object.assign({}, row, { version: version }));
    }, this);
    return out;
  };

  // whether the table's regex `pattern` finds one of `texts`
  Engine.prototype.anyText = function (pattern, texts) {
    var re = this.releaseRegex(pattern);
    return re !== null && texts.some(function (t) { return re.test(t); });
  };

  // releases.shows: whether one of `texts` (a match's lines) is one of the bug's own
  Engine.prototype.showsBug = function (bug, texts) {
    return (bug.log_all || []).some(function (p) { return this.anyText(p, texts); }, this);
  };

  // verdict._release_bugs: the hits showing a bug's own lines, and those of its runbook's last
  // resorts, move to releases.CONCLUSION; {key, keys}, or null
  Engine.prototype.releaseRefine = function (groups, keys, bugs) {
    var target = this.data.releases ? this.data.releases.conclusion : null;
    if (!bugs.length || !target || !this.data.conclusions[target]) return null;
    var book = target.split(":")[0];
    keys.slice().forEach(function (key) {
      if (key === target) return;
      var info = this.data.conclusions[key], texts = this.hitTexts(groups[key]);
      var explained = (key.split(":")[0] === book && info && info.catch_all)
        || bugs.some(function (b) { return this.showsBug(b, texts); }, this);
      if (!explained) return;
      if (!groups[target]) { groups[target] = []; keys.push(target); }
      groups[target] = groups[target].concat(groups[key]);
      delete groups[key];
      keys = keys.filter(function (k) { return k !== key; });
    }, this);
    return { key: target, keys: keys };
  };

  // releases.describe: the release, its bug and where it is fixed
  Engine.prototype.describeRelease = function (bug, lang) {
    var fixed = bug.fixed_in, source = bug.sources[0], title = bug.title[lang] || bug.title.en;
    if (lang === "zh") return "NCCL " + bug.version + " 有已确认的缺陷：" + title + (fixed ? "（" + fixed + " 修复）" : "") + "，" + source;
    return "NCCL " + bug.version + " has a confirmed bug: " + title + (fixed ? " (fixed in " + fixed + ")" : "") + ", " + source;
  };

  // verdict._refine: a conclusion's hits move to a more specific one where their lines' facts say so
  // (the role a rule gives the conclusion it moved hits to goes into `roles`)
  Engine.prototype.refine = function (groups, keys, roles) {
    this.data.ranking.refine.forEach(function (rule) {
      var hits = groups[rule.conclusion];
      if (!hits || !this.data.conclusions[rule.becomes]) return;
      var byNo = {}, wholes = {};
      hits.forEach(function (h) {
        h.first.concat(h.last).forEach(function (l) { byNo[l.no] = l.text; wholes[l.no] = this.whole(l); }, this);
      }, this);
      var numbers = Object.keys(byNo).map(Number).sort(function (a, b) { return a - b; });
      var texts = numbers.map(function (no) { return byNo[no]; });
      // the watchdog's lines as kept (the job's `[rankN]:` before them names who waits)
      if (rule.fact[0] === "watchdog") texts = numbers.map(function (no) { return wholes[no]; });
      var read = { cuda_oom: this.oomFacts, state_dict: this.stateDictFacts, watchdog: this.watchdogFacts }[rule.fact[0]];
      if (!read || read.call(this, texts)[rule.fact[1]] !== true) return;
      if (!groups[rule.becomes]) { groups[rule.becomes] = []; keys.push(rule.becomes); }
      groups[rule.becomes] = groups[rule.becomes].concat(hits);
      delete groups[rule.conclusion];
      keys = keys.filter(function (key) { return key !== rule.conclusion; });
      if (rule.role) roles[rule.becomes] = rule.role;
    }, this);
    return keys;
  };

  // checks/facts/watchdog: whether, in one process group, the ranks' lowest timed-out SeqNums
  // differ and so do their collectives (ranks_in_different_collectives); whether every timeout
  // that gives its SeqNum and size is a one-element collective among its group's first
  // (waits_in_first_collectives)
  Engine.prototype.watchdogFacts = function (texts) {
    var w = this.data.watchdog, seen = {}, kept = [], lowest = {};
    texts.forEach(function (t) {
      t = this.stripAnsi(Array.from(t).slice(0, w.max_line).join(""));
      if (t.indexOf(w.caught) < 0 || t.indexOf("WorkNCCL(") < 0) return;
      var body = t.slice(t.indexOf("WorkNCCL(")), m;
      var pgRank = (m = regex(w.rank).exec(t)) ? Number(m[1]) : null;
      var pg = (m = regex(w.pg).exec(t)) ? Number(m[1]) : null;
      var seq = (m = regex(w.seq).exec(body)) ? Number(m[1]) : null;
      var op = (m = regex(w.op).exec(body)) ? m[1] : null;
      var numel = (m = regex(w.numel_in).exec(body)) ? Number(m[1]) : null;
      var rank = (m = regex(w.job_rank).exec(t)) ? Number(m[1]) : pgRank;
      var key = [rank, pgRank, seq, op].join("|");
      if (has(seen, key)) { if (pg !== null) seen[key].pg = pg; return; }
      if (kept.length >= w.max_items) return;
      seen[key] = { rank: rank, pg: pg, seq: seq, op: op, numel: numel };
      kept.push(seen[key]);
    }, this);
    kept.forEach(function (t) {
      if (t.seq === null) return;
      var byRank = lowest[t.pg] = lowest[t.pg] || {}, mine = byRank[t.rank];
      if (!mine || t.seq < mine.seq) byRank[t.rank] = { seq: t.seq, op: t.op };
    });
    var differ = Object.keys(lowest).some(function (pg) {
      var ranks = Object.keys(lowest[pg]).map(function (r) { return lowest[pg][r]; });
      var seqs = {}, ops = {};
      ranks.forEach(function (r) { seqs[r.seq] = true; ops[r.op] = true; });
      return Object.keys(seqs).length > 1 && Object.keys(ops).length > 1;
    });
    var sized = kept.filter(function (t) { return t.seq !== null && t.numel !== null; });
    var setUp = sized.length > 0 && sized.every(function (t) {
      return t.seq <= w.first_collectives && t.numel === 1;
    });
    return { ranks_in_different_collectives: differ, waits_in_first_collectives: setUp };
  };

  // checks/facts/state_dict: the last missing and unexpected keys, and the prefix between them
  Engine.prototype.stateDictFacts = function (texts) {
    var d = this.data.state_dict, missing = null, unexpected = null;
    var keys = function (text) {
      var out = [], re = regex(d.key, "g"), m;
      while ((m = re.exec(text)) !== null) out.push(m[1]);
      return out;
    };
    texts.forEach(function (t) {
      t = Array.from(t).slice(0, d.max_line).join(""); // _text.clipped
      if (t.indexOf("key(s) in state_dict") < 0) return;
      var m = regex(d.missing).exec(t);
      if (m) missing = keys(m[1]);
      m = regex(d.unexpected).exec(t);
      if (m) unexpected = keys(m[1]);
    });
    if (missing === null && unexpected === null) return {};
    var facts = { explained_by_prefix: false };
    if (!missing || !unexpected || !missing.length || !unexpected.length) return facts;
    var sides = [[unexpected, missing], [missing, unexpected]];
    for (var i = 0; i < sides.length; i++) {
      var longer = sides[i][0], names = {}, prefix = null;
      sides[i][1].forEach(function (k) { names["$" + k] = true; });
      for (var at = longer[0].indexOf("."); at !== -1; at = longer[0].indexOf(".", at + 1)) {
        if (names["$" + longer[0].slice(at + 1)]) { prefix = longer[0].slice(0, at + 1); break; }
      }
      if (prefix === null) continue;
      var explained = longer.filter(function (k) {
        return k.indexOf(prefix) === 0 && names["$" + k.slice(prefix.length)];
      }).length;
      facts.explained_by_prefix = explained >= d.explained_share * Math.min(longer.length, sides[i][1].length);
      break;
    }
    return facts;
  };

  // checks/facts/cuda_oom: what the last allocator message says of memory held outside the process
  Engine.prototype.oomFacts = function (texts) {
    var o = this.data.oom, fields = {}, facts = {}, last = null;
    if (!this.oomRe) {
      this.oomRe = { process: regex(o.process, "g") };
      Object.keys(o.fields).forEach(function (name) { fields[name] = regex(o.fields[name]); });
      this.oomRe.fields = fields;
    }
    texts.forEach(function (t) {
      if (t.indexOf("CUDA out of memory") >= 0 && t.indexOf("Tried to allocate") >= 0) last = t;
    });
    if (last === null) return facts;
    function mib(number, unit) {
      var value = parseFloat(number);
      return isNaN(value) || o.units[unit] === undefined ? null : Math.round(value * o.units[unit] * 100) / 100;
    }
    Object.keys(o.fields).forEach(function (name) { // cuda_oom._size: the first (number, unit) pair
      var m = this.oomRe.fields[name].exec(last);
      var groups = m ? m.slice(1).filter(function (g) { return g !== undefined; }) : [];
      facts[name] = groups.length >= 2 ? mib(groups[0], groups[1]) : null;
    }, this);
    var others = [], re = this.oomRe.process, m;
    re.lastIndex = 0;
    while ((m = re.exec(last)) !== null) others.push(mib(m[2], m[3]) || 0);
    var total = facts.total_mib, free = facts.free_mib, own = facts.this_process_mib, uncounted = 0;
    var pytorch = facts.allocated_by_pytorch_mib, reserved = facts.reserved_unallocated_mib;
    var selfListed = own === null && others.length === 1 && pytorch !== null && reserved !== null &&
      (pytorch + reserved) * o.self_min_share <= others[0] && others[0] <= pytorch + reserved + o.context_max_mib;
    if (own === null && selfListed) own = others[0];
    else if (own === null && others.length === 0 && facts.reserved_total_mib !== null) {
      own = facts.reserved_total_mib; uncounted = o.context_max_mib; // PyTorch's memory alone
    }
    if (total === null || free === null || own === null) return facts;
    if (pytorch !== null && reserved !== null) own = Math.max(own, pytorch + reserved); // PyTorch's is a floor
    var elsewhere = Math.round(Math.max(total - free - own, 0) * 100) / 100, beyond = elsewhere - uncounted;
    facts.elsewhere_mib = elsewhere;
    facts.held_elsewhere = beyond >= o.others_min_mib && beyond >= o.others_min_share * total;
    if (facts.requested_mib !== null) {
      facts.caused_elsewhere = facts.held_elsewhere && facts.requested_mib <= free + elsewhere;
    }
    return facts;
  };

  // verdict._match: the hits of one conclusion, strongest first, as one match
  // verdict._match: `role` a refine rule's, else the most telling of its signatures
  Engine.prototype.match = function (key, hits, lines, role) {
    var ranking = this.ranking;
    hits.forEach(function (h) {
      h.strength = ranking.formula("signature", "strength",
                                   { weight: h.sig.weight, count: h.count, generic: h.sig.generic });
    });
    hits.sort(function (a, b) { return (b.strength - a.strength) || (a.first[0].no - b.first[0].no); });
    var best = hits[0];
    role = role || ranking.topRole(hits.map(function (h) { return h.sig.role; }));
    var generic = hits.every(function (h) { return h.sig.generic; });
    var score = hits.reduce(function (sum, h) { return sum + h.strength; }, 0);
    var first = hits.map(function (h) { return h.first[0]; })
      .reduce(function (a, b) { return b.no < a.no ? b : a; });
    var names = { weight: best.sig.weight, count: best.count, generic: generic, score: score };
    return {
      key: key, runbook: key.split(":")[0], conclusion: key.split(":")[1], info: this.data.conclusions[key],
      role: role, generic: generic, score: score, first: first, hits: hits, time: this.timeNear(first, lines),
      confidence: ranking.confidence("signature", names, role), lines: ranking.shownLines(hits)
    };
  };

  // -- known cases (triage/cases.py): the labelled public reports a paste resembles --

  function stem(word) { // textindex._stem
    if (word.length > 4 && /ies$/.test(word)) return word.slice(0, -3) + "y";
    if (word.length > 3 && /s$/.test(word) && !/(?:ss|us|is)$/.test(word)) return word.slice(0, -1);
    return word;
  }

  // textindex.terms: words (and their hyphen, underscore and dot parts), CJK unigrams and bigrams
  function Tokenizer(cjk) {
    this.runs = new RegExp("[" + cjk + "]+|[a-z0-9]+(?:[-_.][a-z0-9]+)*", "g");
    this.cjk = new RegExp("^[" + cjk + "]");
  }

  Tokenizer.prototype.terms = function (text) {
    var out = [], runs = text.toLowerCase().match(this.runs) || [];
    runs.forEach(function (run) {
      if (this.cjk.test(run)) {
        for (var i = 0; i < run.length; i++) out.push(run[i]);
        for (var j = 0; j + 1 < run.length; j++) out.push(run.slice(j, j + 2));
        return;
      }
      out.push(stem(run));
      var parts = run.split(/[-_.]/);
      if (parts.length > 1) parts.forEach(function (p) { if (p) out.push(stem(p)); });
    }, this);
    return out;
  };

  // textindex.query_terms: {term: weight} in the order first found; a single CJK character that
  // is part of a bigram of the query weighs little
  Tokenizer.prototype.queryTerms = function (text, unigramWeight) {
    var found = this.terms(text), bigrams = [], weights = Object.create(null), order = [];
    found.forEach(function (t) { if (t.length === 2 && this.cjk.test(t)) bigrams.push(t); }, this);
    found.forEach(function (t) {
      var single = t.length === 1 && this.cjk.test(t);
      var w = single && bigrams.some(function (b) { return b.indexOf(t) >= 0; }) ? unigramWeight : 1.0;
      if (!has(weights, t)) { weights[t] = 0; order.push(t); }
      weights[t] = Math.max(weights[t], w);
    }, this);
    return { weights: weights, order: order };
  };

  function KnownCases(data, tokenizer) {
    this.tokenizer = tokenizer;
    this.maxDigits = data.max_digits;
    this.items = data.items;
    var df = Object.create(null), n = data.items.length;
    data.items.forEach(function (c) { Object.keys(c.terms).forEach(function (t) { df[t] = (df[t] || 0) + 1; }); });
    this.idf = Object.create(null);
    Object.keys(df).forEach(function (t) { this.idf[t] = Math.log(n / df[t]); }, this);
    this.rarest = Math.log(n || 1);
    this.postings = Object.create(null); // no inherited keys: a log may say `constructor`
    data.items.forEach(function (c, i) {
      var v = this.vector(c.terms);
      Object.keys(v).forEach(function (t) { (this.postings[t] = this.postings[t] || []).push([i, v[t]]); }, this);
    }, this);
  }

  // cases.case_terms: terms of two characters or more that start with a letter, few digits
  KnownCases.prototype.count = function (texts) {
    var count = Object.create(null), keys = [], max = this.maxDigits;
    texts.forEach(function (text) {
      this.tokenizer.terms(text).forEach(function (t) {
        if (t.length < 2 || /^[0-9]/.test(t) || (t.match(/[0-9]/g) || []).length > max) return;
        if (!has(count, t)) { count[t] = 0; keys.push(t); }
        count[t] += 1;
      });
    }, this);
    return { count: count, keys: keys };
  };

  KnownCases.prototype.vector = function (count, keys) {
    var weights = Object.create(null), order = [], norm = 0;
    (keys || Object.keys(count)).forEach(function (t) {
      var w = (1 + Math.log(count[t])) * (has(this.idf, t) ? this.idf[t] : this.rarest);
      if (w > 0) { weights[t] = w; order.push(t); norm += w * w; }
    }, this);
    norm = Math.sqrt(norm) || 1;
    order.forEach(function (t) { weights[t] /= norm; });
    return weights;
  };

  function round4places(value) { return pyRound(value, 4); } // Python round(x, 4)

  // cases.KnownCases.votes: the nearest cases' conclusions by summed similarity
  KnownCases.prototype.votes = function (counted, top, minSimilarity) {
    var q = this.vector(counted.count, counted.keys), sums = Object.create(null), seen = [];
    Object.keys(q).forEach(function (t) {
      (this.postings[t] || []).forEach(function (p) {
        if (!has(sums, p[0])) { sums[p[0]] = 0; seen.push(p[0]); }
        sums[p[0]] += q[t] * p[1];
      });
    }, this);
    seen.sort(function (a, b) { return (sums[b] - sums[a]) || (a - b); });
    var by = Object.create(null), order = [];
    seen.slice(0, top).forEach(function (i) {
      var item = this.items[i];
      if (sums[i] < minSimilarity || !item.conclusions.length) return;
      var key = item.conclusions[0];
      if (!by[key]) { by[key] = []; order.push(key); }
      by[key].push({ similarity: round4places(sums[i]), source: item.source });
    }, this);
    var votes = order.map(function (key) {
      return { conclusion: key, cases: by[key],
               score: round4places(by[key].reduce(function (a, c) { return a + c.similarity; }, 0)) };
    });
    return votes.sort(function (a, b) {
      return (b.score - a.score) || (a.conclusion < b.conclusion ? -1 : a.conclusion > b.conclusion ? 1 : 0);
    });
  };

  // fallback.SimilarityIndex: every conclusion and article as a BM25 document, from the CLI's own
  // term counts (site/triage_export.py), summed in the order Python sums them
  function SimilarityIndex(data, tokenizer, ranking) {
    this.data = data;
    this.tokenizer = tokenizer;
    this.ranking = ranking;
    this.n = data.docs.length;
    this.df = Object.create(null);
    this.postings = Object.create(null); // term -> [doc, field, count], by doc then field
    this.common = Object.create(null);
    data.common.forEach(function (word) { this.common[word] = true; }, this);
    var totals = Object.create(null);
    this.lengths = data.docs.map(function (doc, i) {
      var lengths = Object.create(null), seen = Object.create(null);
      doc.fields.forEach(function (field) {
        var name = field[0], counts = field[1], length = 0;
        Object.keys(counts).forEach(function (t) {
          length += counts[t];
          if (!seen[t]) { seen[t] = true; this.df[t] = (this.df[t] || 0) + 1; }
          (this.postings[t] = this.postings[t] || []).push([i, name, counts[t]]);
        }, this);
        lengths[name] = length;
        totals[name] = (totals[name] || 0) + length;
      }, this);
      return lengths;
    }, this);
    this.average = Object.create(null);
    Object.keys(totals).forEach(function (name) { this.average[name] = totals[name] / this.n; }, this);
  }

  SimilarityIndex.prototype.idf = function (term) {
    var df = this.df[term];
    return df ? Math.log(1 + this.n / df) : 0;
  };

  // textindex.Index.scores: per field BM25, weighted by the field's weight, summed
  SimilarityIndex.prototype.scores = function (query) {
    var out = [], d = this.data, k1 = d.k1, b = d.b;
    for (var i = 0; i < this.n; i++) out.push(0);
    query.order.forEach(function (term) {
      var idf = this.idf(term), weight = query.weights[term];
      if (!idf) return;
      (this.postings[term] || []).forEach(function (p) {
        var doc = p[0], name = p[1], tf = p[2];
        var norm = k1 * (1 - b + b * this.lengths[doc][name] / (this.average[name] || 1.0));
        out[doc] += weight * (has(d.weights, name) ? d.weights[name] : 1.0) * idf * tf * (k1 + 1) / (tf + norm);
      }, this);
    }, this);
    return out;
  };

  // the documents scoring at least min_score (all, or conclusions only), best first
  SimilarityIndex.prototype.ranked = function (scores, conclusionsOnly) {
    var min = this.ranking.rules.evidence.similar.min_score, docs = this.data.docs, out = [];
    scores.forEach(function (score, i) {
      if (score >= min && (!conclusionsOnly || docs[i].kind === "conclusion")) out.push(i);
    });
    return out.sort(function (a, b) { return (scores[b] - scores[a]) || (a - b); });
  };

  // fallback.SimilarityIndex.similar: what an error line no signature knows resembles
  SimilarityIndex.prototype.similar = function (line, text, conclusions) {
    var d = this.data, rules = this.ranking.rules.evidence.similar;
    var scores = this.scores(this.tokenizer.queryTerms(text, d.unigram_weight));
    var ranked = this.ranked(scores, false).slice(0, rules.top);
    var best = ranked.length ? scores[ranked[0]] : 1.0;
    return ranked.map(function (i) {
      var doc = d.docs[i], key = doc.runbook + ":" + doc.id;
      return { key: key, runbook: doc.runbook, conclusion: doc.id, kind: doc.kind,
               info: doc.kind === "article" ? d.articles[doc.id] : conclusions[key],
               role: "similar", generic: false, score: scores[i], first: line, hits: [], time: null,
               lines: [line], cases: null,
               confidence: this.ranking.confidence("similar", { score: scores[i], best: best }, "similar") };
    }, this);
  };

  // fallback._is_word: Chinese, or a word of three letters or more that not every line has
  SimilarityIndex.prototype.isWord = function (term) {
    if (/[\u3400-\u9fff]/.test(term)) return true;
    return term.length >= 3 && /[a-z]/.test(term) && !this.common[term];
  };

  // fallback.SimilarityIndex.resembling: the conclusions a paste with no error line resembles, with
  // the words they share, rarest first
  SimilarityIndex.prototype.resembling = function (text, top, whyWords, conclusions) {
    var d = this.data, found = this.tokenizer.queryTerms(text, d.unigram_weight);
    var query = { weights: Object.create(null), order: [] };
    found.order.forEach(function (t) {
      if (this.isWord(t)) { query.weights[t] = found.weights[t]; query.order.push(t); }
    }, this);
    var scores = this.scores(query);
    return this.ranked(scores, true).slice(0, top).map(function (i) {
      var doc = d.docs[i], key = doc.runbook + ":" + doc.id, held = Object.create(null), self = this;
      doc.fields.forEach(function (field) { Object.keys(field[1]).forEach(function (t) { held[t] = true; }); });
      var shared = query.order.filter(function (t) { return held[t]; }).sort(function (a, b) {
        return (self.idf(b) - self.idf(a)) || (a < b ? -1 : a > b ? 1 : 0);
      });
      return { key: key, runbook: doc.runbook, conclusion: doc.id, info: conclusions[key],
               shared: shared.slice(0, whyWords) };
    }, this);
  };

  // result._with_cases and cases.case_matches: the votes as `similar` matches; after a cause's or a
  // knock-on's own while the answer is short, or ranked with BM25's when only resemblance speaks
  Engine.prototype.withCases = function (matches, verdict, lines) {
    if (!this.cases || verdict === "no-error") return matches;
    var rules = this.data.ranking.evidence["case"];
    var texts = lines.slice(-this.data.advice.tail_lines).map(function (l) { return l.text; });
    var votes = this.cases.votes(this.cases.count(texts), rules.neighbours, rules.min_similarity);
    var total = votes.reduce(function (a, v) { return a + v.score; }, 0) || 1, named = Object.create(null);
    var found = [];
    votes.forEach(function (vote) {
      var key = vote.conclusion, parts = key.split(":");
      if (!this.data.conclusions[key]) return;
      found.push({ key: key, runbook: parts[0], conclusion: parts[1], info: this.data.conclusions[key],
                   role: "similar", kind: "case", generic: false, score: vote.score, first: null, hits: [],
                   time: null, lines: [], cases: vote.cases,
                   confidence: this.ranking.confidence("case", { similarity: vote.cases[0].similarity,
                                                                  share: vote.score / total }, "similar") });
    }, this);
    if (verdict === "unknown") return this.fused(matches, found);
    matches.forEach(function (m) { named[m.key] = true; });
    // result._refused_by_facts: where a refine rule's conclusion is still named, its lines' facts
    // did not lead to the rule's `becomes`, and no report's resemblance names it either
    this.data.ranking.refine.forEach(function (rule) { if (named[rule.conclusion]) named[rule.becomes] = true; });
    found = found.filter(function (m) { return !named[m.key]; }).slice(0, rules.fill_to);
    return matches.concat(found.slice(0, Math.max(0, rules.fill_to - matches.length)));
  };

  // result._fused: BM25's matches and the reports' votes in one order (the ranking's text_weight and
  // full_similarity); a conclusion both name is the text's match, with the reports it rests on
  Engine.prototype.fused = function (text, votes) {
    var rules = this.data.ranking.evidence["case"], limit = this.data.ranking.evidence.similar.top + rules.fill_to;
    function best(list) { return Math.max.apply(null, list.map(function (m) { return m.score; }).concat([-Infinity])); }
    var bestText = text.length ? best(text) || 1.0 : 1.0, bestVote = votes.length ? best(votes) || 1.0 : 1.0;
    var scored = Object.create(null), order = [];
    text.forEach(function (m) {
      var key = m.kind + "|" + m.key;
      if (!has(scored, key)) order.push(key);
      scored[key] = { score: rules.text_weight * m.score / bestText, match: m };
    });
    votes.forEach(function (vote) {
      var key = "conclusion|" + vote.key, nearest = vote.cases.length ? vote.cases[0].similarity : 0;
      var weight = vote.score / bestVote * Math.min(1.0, nearest / rules.full_similarity);
      if (has(scored, key)) {
        var merged = Object.assign({}, scored[key].match, { cases: vote.cases });
        scored[key] = { score: scored[key].score + weight, match: merged };
      } else {
        order.push(key);
        scored[key] = { score: weight, match: vote };
      }
    });
    var round9 = function (x) { return Math.round(x * 1e9) / 1e9; };
    return order.map(function (key, i) { return [i, scored[key]]; })
      .sort(function (a, b) { return (round9(b[1].score) - round9(a[1].score)) || (a[0] - b[0]); })
      .slice(0, limit).map(function (pair) { return pair[1].match; });
  };

  // -- the page --

  function element(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function Page(engine, form, ui, lang) {
    this.engine = engine;
    this.form = form;
    this.ui = ui;
    this.lang = lang;
    this.root = document.body.getAttribute("data-root") || "./";
    this.status = document.getElementById("triage-status");
    this.list = document.getElementById("triage-results");
  }

  Page.prototype.show = function (text) {
    this.status.textContent = "";
    this.list.textContent = "";
    this.status.removeAttribute("data-verdict");
    if (!text.trim()) { this.say("empty", this.ui.triage_empty); return null; }
    var result = this.engine.triage(text);
    if (result.verdict === "cause" || result.verdict === "knock-on") this.showMatches(result);
    else if (result.verdict === "unknown") this.showUnknown(result.errorLine, result.matches);
    else {
      this.say("no-error", this.ui.triage_no_error);
      this.listMatches(result.matches); // a `healthy` answer: the numbers read as well
    }
    if (result.differences.length) this.showDifferences(result.differences);
    if (result.readings.length) this.showReadings(result.readings);
    if (result.shape) this.showAdvice(result.shape, result.closest);
    return result;
  };

  // "What it means:" and a link to the conclusion a difference or a reading points to
  Page.prototype.addMeaning = function (item, conclusion) {
    var info = this.engine.data.conclusions[conclusion];
    if (!info) return;
    var means = element("p", "triage-differs-means", this.ui.triage_differs_means + " ");
    var link = element("a", null, info.title[this.lang] || info.title.en);
    link.href = this.root + info.url[this.lang];
    means.appendChild(link);
    item.appendChild(means);
  };

  // What differs across hosts or ranks (spread.py), with the conclusion it points to
  Page.prototype.showDifferences = function (differences) {
    var ui = this.ui, box = element("div", "triage-differences");
    box.appendChild(element("p", "triage-differs-title", ui.triage_differs));
    var list = element("ul");
    differences.forEach(function (diff) {
      var item = element("li");
      item.setAttribute("data-fact", diff.fact);
      item.appendChild(element("strong", null, diff.fact + ": "));
      item.appendChild(document.createTextNode(diff.values.map(function (v) {
        return v.value + " " + ui.triage_differs_on + " " + v.who.join(", ") + (v.more ? " (+" + v.more + ")" : "");
      }).join("; ")));
      this.addMeaning(item, diff.conclusion);
      list.appendChild(item);
    }, this);
    box.appendChild(list);
    this.status.appendChild(box);
  };

  // What the numbers show (series.py), each with the conclusion it points to
  Page.prototype.showReadings = function (readings) {
    var ui = this.ui, box = element("div", "triage-readings");
    var ends = this.engine.data.logends.texts;  // a paste that just stops: its end, not numbers, is read
    var title = readings.every(function (r) { return ends[r.reading]; }) ? ui.triage_log_end : ui.triage_numbers;
    box.appendChild(element("p", "triage-readings-title", title));
    var list = element("ul");
    readings.forEach(function (reading) {
      var item = element("li");
      item.setAttribute("data-reading", reading.reading);
      item.appendChild(document.createTextNode(this.engine.describeReading(reading, this.lang)));
      this.addMeaning(item, reading.conclusion);
      list.appendChild(item);
    }, this);
    box.appendChild(list);
    this.status.appendChild(box);
  };

  // What the excerpt lacks and what to collect next (advice_rules.py, applied as the CLI does)
  Page.prototype.showAdvice = function (shape, closest) {
    var lang = this.lang, collect = this.engine.data.advice.collect;
    var box = element("div", "triage-advice");
    box.setAttribute("data-shape", shape.id);
    box.appendChild(element("p", "triage-lacks", this.ui.triage_lacks + " " + shape.text[lang]));
    box.appendChild(element("p", "triage-collect-title", this.ui.triage_collect));
    var list = element("ul", "triage-collect");
    shape.collect.forEach(function (id) {
      var entry = collect[id], item = element("li");
      item.setAttribute("data-collect", id);
      item.appendChild(element("p", "collect-why", entry.why[lang]));
      item.appendChild(element("pre", "code collect-command", entry.command));
      if (entry.instead) {
        item.appendChild(element("p", "collect-instead", this.ui.triage_or)).appendChild(element("code", null, entry.instead));
      }
      list.appendChild(item);
    }, this);
    box.appendChild(list);
    if (closest && closest.length) box.appendChild(this.closestList(closest));
    this.status.appendChild(box);
  };

  // advice's `closest`: the conclusions a paste with no error line resembles, and the words why
  Page.prototype.closestList = function (closest) {
    var box = element("div", "triage-closest");
    box.appendChild(element("p", "triage-closest-title", this.ui.triage_closest));
    var list = element("ul");
    closest.forEach(function (c) {
      var item = element("li"), link = element("a", null, c.info.title[this.lang] || c.info.title.en);
      item.setAttribute("data-match", c.key);
      link.href = this.root + c.info.url[this.lang];
      item.appendChild(link);
      item.appendChild(element("span", "closest-words", " (" + this.ui.triage_shared_words + " " + c.shared.join(", ") + ")"));
      list.appendChild(item);
    }, this);
    box.appendChild(list);
    return box;
  };

  Page.prototype.clip = function (raw) { // a line as shown: data.text_max characters (triage/scan.py)
    var text = this.engine.stripAnsi(raw), width = this.engine.data.text_max;
    return text.length <= width ? text : text.slice(0, width) + "…";
  };

  Page.prototype.say = function (verdict, text) {
    this.status.setAttribute("data-verdict", verdict);
    this.status.appendChild(element("p", "triage-verdict", text));
  };

  Page.prototype.showMatches = function (result) {
    var found = this.ui.triage_found.replace("{lines}", String(result.lines));
    this.say(result.verdict, result.matches.length + " " + found);
    if (result.verdict === "knock-on") {
      this.status.appendChild(element("p", "triage-knock-on-only", this.ui.triage_knock_on_only));
      this.status.appendChild(element("p", "hint", this.ui.triage_knock_on_next));
    }
    this.listMatches(result.matches);
  };

  Page.prototype.listMatches = function (matches) {
    matches.forEach(function (match, index) { this.list.appendChild(this.item(match, index + 1)); }, this);
  };

  Page.prototype.item = function (match, rank) {
    var ui = this.ui, info = match.info;
    var item = element("li", "triage-match role-" + match.role);
    item.setAttribute("data-match", match.key);
    item.setAttribute("data-role", match.role);
    item.setAttribute("data-kind", match.kind || "conclusion");
    item.setAttribute("data-confidence", match.confidence.toFixed(2));
    var head = element("p", "match-head");
    head.appendChild(element("span", "match-rank", String(rank) + "."));
    head.appendChild(element("span", "badge match-role role-" + match.role, ui["triage_role_" + match.role]));
    var link = element("a", "match-title", info.title[this.lang] || info.title.en);
    link.href = this.root + info.url[this.lang];
    head.appendChild(link);
    item.appendChild(head);
    var meta = element("p", "match-meta");
    var article = match.kind === "article";
    meta.appendChild(element("span", "match-runbook", article ? match.conclusion : match.runbook + ":" + match.conclusion));
    info.taxonomy.forEach(function (tid) {
      var tag = element("a", "tag tax", tid);
      tag.href = this.root + this.lang + "/categories/#" + tid;
      meta.appendChild(tag);
    }, this);
    meta.appendChild(element("span", "match-confidence",
                             ui.triage_confidence + " " + match.confidence.toFixed(2)));
    item.appendChild(meta);
    if (match.release) item.appendChild(element("p", "match-release", this.engine.describeRelease(match.release, this.lang)));
    if (match.reading) item.appendChild(element("p", "match-reading", this.engine.describeReading(match.reading, this.lang)));
    else {
      if (match.lines.length) item.appendChild(this.lineList(match.lines));
      if (match.cases) item.appendChild(this.caseList(match.cases));
    }
    var open = element("a", "match-open", (article ? ui.triage_open_article : ui.triage_open_runbook) + " →");
    open.href = this.root + info.url[this.lang];
    item.appendChild(element("p")).appendChild(open);
    return item;
  };

  Page.prototype.lineList = function (lines) {
    var box = element("div", "match-lines");
    box.appendChild(element("p", "match-lines-title", this.ui.triage_matched_lines));
    var pre = element("pre", "code");
    lines.forEach(function (line) {
      var row = element("span", "match-line");
      row.appendChild(element("span", "line-no", this.ui.triage_line + " " + line.no));
      row.appendChild(document.createTextNode(" " + this.clip(line.raw) + "\n"));
      pre.appendChild(row);
    }, this);
    box.appendChild(pre);
    return box;
  };

  // The reports a `case` match rests on, nearest first, with their similarity
  Page.prototype.caseList = function (cases) {
    var box = element("div", "match-cases");
    box.appendChild(element("p", "match-cases-title", this.ui.triage_cases));
    var list = element("ul");
    cases.forEach(function (c) {
      var link = element("a", null, c.source), item = element("li");
      link.href = c.source;
      link.rel = "noopener";
      item.appendChild(link);
      item.appendChild(document.createTextNode(" (" + c.similarity.toFixed(2) + ")"));
      list.appendChild(item);
    });
    box.appendChild(list);
    return box;
  };

  Page.prototype.showUnknown = function (line, matches) {
    this.say("unknown", this.ui.triage_unknown);
    var pre = element("pre", "code triage-error-line");
    pre.appendChild(element("span", "line-no", this.ui.triage_line + " " + line.no));
    pre.appendChild(document.createTextNode(" " + this.clip(line.raw)));
    this.status.appendChild(pre);
    var search = element("a", "triage-search", this.ui.triage_search_it + " →");
    search.href = this.form.getAttribute("data-search-url") + "?q=" + encodeURIComponent(line.text.slice(0, 200));
    this.status.appendChild(element("p")).appendChild(search);
    if (matches.length) this.status.appendChild(element("p", "triage-cases-title", this.ui.triage_cases_unknown));
    this.listMatches(matches);
  };

  function setUp() {
    var form = document.querySelector("[data-triage-form]");
    if (!form) return;
    var ui = JSON.parse(document.getElementById("triage-strings").textContent);
    var data = window.RUNBOOK_TRIAGE;
    if (!data) {
      document.getElementById("triage-status").textContent = ui.triage_unavailable;
      return;
    }
    var engine = new Engine(data);
    if (engine.broken.length && window.console) console.warn("triage: patterns that do not compile:", engine.broken);
    var page = new Page(engine, form, ui, document.body.getAttribute("data-lang") || "en");
    var input = document.getElementById("triage-input");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      page.show(input.value);
    });
    form.addEventListener("reset", function () {
      page.status.textContent = "";
      page.list.textContent = "";
      page.status.removeAttribute("data-verdict");
    });
    window.runbookTriage = { engine: engine, page: page, Engine: Engine };
  }

  if (document.readyState !== "loading") setUp(); else document.addEventListener("DOMContentLoaded", setUp);
})();
