/* The memory page's sizing calculator: what its form (docsrc/_templates/sizing.html) does, on
   the data as evidence/sizing.py loads it, which the page embeds. evaluate() and
   recommend() do what their namesakes there do; tests/docs/test_memory_sizing.py checks it. */
"use strict";

const GB = 1e9;

function value(coefficients, variables) {
  return Object.entries(coefficients).reduce((sum, [name, f]) => sum + f * variables[name], 0);
}

/* The host, GPU and host + GPU peaks of a setting for a model of `weights` bytes, and whether
   they fit a machine whose memories hold `limits` bytes ({host, gpu} or {shared}). */
function evaluate(data, settingId, weights, limits, workspace = 0, budget = null) {
  const setting = data.settings[settingId];

  // Step 1: the largest engine's weights S, and how many engines.
  let [engineWeights, engines, refused] = [weights, 1, ""];
  if (setting.partitioning) {
    const remaining = (budget ?? limits.shared ?? limits.host) - (setting.offload ? weights : 0);
    if (data.partitioning.multiplier * weights >= remaining) {
      const piece = remaining / data.partitioning.multiplier;
      if (piece <= 0 || weights > piece * data.partitioning.max_engines) {
        refused = "the budget is too small: upstream's partitioner refuses the model";
      } else {
        [engineWeights, engines] = [piece, Math.ceil(weights / piece)];
      }
    }
  }
  const variables = { W: weights, S: engineWeights, bytes: 1, workspace: workspace };

  // Step 2: each peak is the largest sum of the terms of a phase, at each end, and that phase.
  const peaks = { host: {}, gpu: {}, shared: {} };
  for (const phase of Object.values(setting.phases)) {
    for (const memory of Object.keys(peaks)) {
      for (const bound of ["low", "high"]) {
        const values = phase[memory].map((name) => data.terms[name][bound]);
        const total = values.reduce((sum, term) => sum + value(term, variables), 0);
        if (total > (peaks[memory][bound] ?? -1)) {
          Object.assign(peaks[memory], { [bound]: total, [bound + "_phase"]: phase.id });
        }
      }
    }
  }

  // Step 3: what fits.
  const fit = (bound) => Object.keys(limits).every((m) => peaks[m][bound] <= limits[m]);
  const verdict = fit("high") ? "fits" : fit("low") ? "may fit" : "does not fit";
  return { setting: settingId, S: engineWeights, engines, refused, peaks, variables,
           verdict: refused ? "refused" : verdict };
}

function recommend(data, weights, limits, workspace = 0, budget = null) {
  const found = data.recommend.map((id) => evaluate(data, id, weights, limits, workspace, budget));
  const memory = "shared" in limits ? "shared" : "host";
  const built = found.filter((result) => !result.refused);
  const closest = (built.length ? built : found).reduce(
    (best, result) => (result.peaks[memory].low < best.peaks[memory].low ? result : best));
  return found.find((result) => result.verdict === "fits") ||
    found.find((result) => result.verdict === "may fit") || closest;
}

function gb(bytes) {
  const shown = bytes / GB;
  return (shown < 10 ? shown.toFixed(1) : shown.toFixed(0)) + " GB";
}

function span(low, high) {
  if (gb(low) === gb(high)) return gb(high);
  return (low <= 0 ? "0" : gb(low).replace(" GB", "")) + "-" + gb(high);
}

/* -- the page ------------------------------------------------------------------------------ */

function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, text] of Object.entries(attributes)) node.setAttribute(name, text);
  node.append(...children);
  return node;
}

/* A setting's card: its verdict, then each peak and what sets it (its phase, and its terms,
   each linked to its first source), or why the setting is refused. */
function card(data, result, limits) {
  const setting = data.settings[result.setting];
  const title = element("p", { class: "sizing-result-title" }, element("strong", {}, setting.name),
    " ", element("span", { class: "sizing-verdict" }, result.verdict));
  const node = element("div", { class: "sizing-result", "data-setting": setting.id,
                                "data-verdict": result.verdict }, title);
  if (result.refused) {
    node.append(element("p", {}, result.refused));
    return node;
  }
  for (const memory of Object.keys(limits)) {
    const peak = result.peaks[memory];
    const phase = setting.phases[peak.high_phase];
    const terms = element("ul", {});
    const setBy = element("div", { class: "sizing-terms" }, `set by ${phase.name}:`, terms);
    for (const id of phase[memory]) {
      const term = data.terms[id];
      const [low, high] = [value(term.low, result.variables), value(term.high, result.variables)];
      const source = term.sources[0];
      const link = element("a", { href: source.link, title: source.says || "" }, term.name);
      if (high > 0) terms.append(element("li", {}, link, " " + span(low, high)));
    }
    const shown = data.memories[memory] + " peak " + span(peak.low, peak.high);
    node.setAttribute("data-" + memory + "-low", peak.low);
    node.setAttribute("data-" + memory + "-high", peak.high);
    node.append(element("p", { class: "sizing-peak", "data-memory": memory }, shown), setBy);
  }
  if (setting.partitioning) {
    const engines = `${result.engines} engine(s) of at most ${gb(result.S)} of weights`;
    node.append(element("p", { class: "sizing-hint" }, engines));
  }
  return node;
}

function build() {
  const data = JSON.parse(document.getElementById("memory-terms").textContent);
  const field = (name) => document.getElementById("sizing-" + name);
  const readGB = (name) => (field(name).valueAsNumber >= 0 ? field(name).valueAsNumber * GB : null);

  // After a change of the field `changed`: the answer, and a card per setting.
  function update(changed) {
    // Step 1: what the change fills in: a preset, its figures (its option's data-FIELD) and
    // note; parameters x dtype, the weights; weights typed in clear the parameters.
    if (changed === "machine") {
      const preset = field("machine").selectedOptions[0];
      field("machine-note").textContent = preset.title;
      for (const [key, figure] of Object.entries(preset.dataset)) field(key).value = figure;
    }
    const bytes = field("parameters").valueAsNumber * data.dtypes[field("dtype").value];
    if ((changed === "parameters" || changed === "dtype") && isFinite(bytes)) {
      field("weights").value = String(Math.round(bytes * 1000) / 1000);
    }
    if (changed === "weights") field("parameters").value = "";

    // Step 2: the machine and the model the form describes.
    const shared = field("kind").value === "shared";
    field("separate").hidden = shared;
    field("shared").hidden = !shared;
    const limits = shared
      ? { shared: readGB("usable") }
      : { host: readGB("host"), gpu: readGB("gpu") };
    const weights = readGB("weights");
    const answer = field("answer");
    field("results").textContent = "";
    if (!weights || Object.values(limits).includes(null)) {
      answer.textContent = "Give the model's size and the machine's memory.";
      return;
    }

    // Step 3: the setting to use, and every setting's card.
    const [workspace, budget] = [readGB("workspace") || 0, readGB("budget")];
    const best = recommend(data, weights, limits, workspace, budget);
    const name = data.settings[best.setting].name;
    answer.dataset.setting = best.setting;
    answer.dataset.verdict = best.verdict;
    answer.textContent = best.verdict === "fits" || best.verdict === "may fit"
      ? `Use: ${name} (${best.verdict}).`
      : weights > (limits.gpu ?? Infinity)
        ? `No setting fits: the engines alone need W = ${gb(weights)} on the GPU (see weight ` +
          "streaming below)."
        : `No setting fits this machine; the closest is ${name}.`;
    for (const id of Object.keys(data.settings)) {
      const result = evaluate(data, id, weights, limits, workspace, budget);
      field("results").append(card(data, result, limits));
    }
  }

  field("form").addEventListener("input", ({ target }) => update(target.id.replace("sizing-", "")));
  field("form").hidden = false;
  update("machine");
  update("parameters");
}

if (typeof document !== "undefined") build();
if (typeof module !== "undefined") module.exports = { evaluate, recommend, gb, span };
